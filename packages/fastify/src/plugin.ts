/**
 * The Fastify plugin: `await app.register(tollgate, { rules, ... })`.
 *
 * Wrapped with fastify-plugin, so it acts in the scope it is registered in and that
 * scope's children. An `onRoute` hook gives every route of the scope its own decision
 * hook, built once when the route is declared: the plugin-level stack; with
 * `config.rateLimit: { rules }` that stack plus the route's rules as one all-or-nothing
 * stack (or the route's rules alone, `mode: 'replace'`); with `config.rateLimit: false`
 * none. Registrations stack (outer first, draft-10 items appended, `request.rateLimit`
 * merged); a route's rules join the innermost registration that sees it.
 *
 * Routes declared before the plugin loaded (`app.register(tollgate, ...)` without
 * `await`, then routes) never pass through its `onRoute` hook: a scope-level hook then
 * decides them too, so no route of the scope is left unlimited whatever the order.
 */
import { createRateLimit, type Decide, groupOperations } from '@tollgate/core/http';
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { normalise, routeOption, type TollgateHook, type TollgateOptions } from './options.js';
import { fastifyPort } from './port.js';

type Hook = Decide<FastifyRequest, FastifyReply, HookHandlerDoneFunction>;
/** The registration that owns route-level rules in a scope (inherited by child scopes). */
const OWNER = Symbol.for('tollgate.fastify.owner');
/** Marks tollgate's own hook functions in a route's hook lists. */
const MARK = Symbol.for('tollgate.fastify.hook');
/** Marks the config of a route the `onRoute` hook saw, per registration. */
const SEEN = Symbol('tollgate.fastify.seen');

type HookFn = ((...args: never[]) => void) & { [MARK]?: true };
type Scope = FastifyInstance & { [OWNER]?: object };
type Config = { rateLimit?: unknown; [SEEN]?: Set<object> };

/** The same decision as a `preParsing` hook, whose callback comes fourth. */
function asHook(decide: Hook, hook: TollgateHook): HookFn {
  const fn: HookFn =
    hook === 'preParsing'
      ? function tollgatePreParsing(request: FastifyRequest, reply: FastifyReply, _payload: unknown, done: HookHandlerDoneFunction) {
          decide(request, reply, done);
        }
      : decide;
  fn[MARK] = true;
  return fn;
}

/**
 * Adds `fn` to a route's own hook list without touching the list the route was declared
 * with. Early hooks go before the route's own hooks (a refusal comes before their work);
 * `preValidation` and `preHandler` after them (keys can read what authentication set).
 */
function install(route: RouteOptions, hook: TollgateHook, fn: HookFn): void {
  const r = route as unknown as Record<TollgateHook, HookFn | HookFn[] | undefined>;
  const existing = r[hook];
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  let at = list.length;
  if (hook === 'onRequest' || hook === 'preParsing') for (at = 0; at < list.length && (list[at] as HookFn)[MARK] === true; ) at++;
  r[hook] = [...list.slice(0, at), fn, ...list.slice(at)];
}

function register(fastify: FastifyInstance, options: TollgateOptions): void {
  const o = normalise(options);
  const { handler } = o;
  const core = createRateLimit(fastifyPort, o, {
    path: 'tollgate',
    allowEmpty: true,
    // Each route gets its whole stack (core.stack), never a route stage (core.route).
    routeStages: false,
    ...(typeof handler === 'function' ? { handler: (req, res, _done, d) => handler(req, res, d) } : {}),
  });
  const owner = {};

  /**
   * A route's hook and decision in this registration, built once per route config: the
   * route's own stack when it has rules this registration owns, else the plugin-level
   * decision when there is one; undefined for none (`config.rateLimit: false` included).
   */
  function decisionFor(config: Config, where: string, owned: boolean): { hook: TollgateHook; decide: Hook } | undefined {
    if (config.rateLimit === false) return undefined;
    const own = config.rateLimit === undefined ? {} : routeOption(config.rateLimit, where);
    const hook = own.hook ?? o.hook;
    if (owned && own.rules !== undefined && own.rules.length > 0) {
      return { hook, decide: core.stack(core.routeLimiter(own.rules, own.mode ?? 'add', `${where} config.rateLimit.rules`)) };
    }
    return core.active ? { hook, decide: core.handle } : undefined;
  }

  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  // `app.tollgate`: one group for every registration this instance sees (a second one, or
  // one in a child scope, joins it).
  const operations = groupOperations(fastify.tollgate, core);
  if (operations !== undefined) fastify.decorate('tollgate', operations);
  (fastify as Scope)[OWNER] = owner;

  if (fastify.printRoutes() !== '(empty tree)') lateRoutes(fastify as Scope);

  fastify.addHook('onRoute', function tollgateRoute(this: Scope, route) {
    const config = (route.config ?? {}) as Config;
    const method = Array.isArray(route.method) ? route.method.join(',') : route.method;
    const d = decisionFor(config, `${method} ${route.url}`, this[OWNER] === owner);
    // The config is copied into the route's context after this hook: mark it seen.
    route.config = { ...config, [SEEN]: new Set([...(config[SEEN] ?? []), owner]) } as NonNullable<typeof route.config>;
    if (d !== undefined) install(route, d.hook, asHook(d.decide, d.hook));
  });

  /** A scope-level hook for routes declared before this plugin loaded, which `onRoute` never saw. */
  function lateRoutes(scope: Scope): void {
    const decisions = new WeakMap<object, Hook | null>();
    const late: Hook = function tollgateLateRoute(request, reply, done) {
      const config = request.routeOptions.config as Config;
      if (config[SEEN]?.has(owner)) return done();
      let decide = decisions.get(config);
      if (decide === undefined) {
        decide = decisionFor(config, `${request.method} ${request.routeOptions.url}`, true)?.decide ?? null;
        decisions.set(config, decide);
      }
      if (decide === null) done();
      else decide(request, reply, done);
    };
    scope.addHook(o.hook as 'onRequest', asHook(late, o.hook) as Hook);
  }

  fastify.addHook('onClose', function closeTollgateStore(_instance, next) {
    core.close().then(() => next(), next);
  });
}

const tollgatePlugin: FastifyPluginCallback<TollgateOptions> = function tollgate(fastify, options, done) {
  try {
    register(fastify, options);
  } catch (err) {
    done(err as Error);
    return;
  }
  done();
};

/**
 * Rate-limits the routes of the scope it is registered in.
 * @example
 * import tollgate, { user } from '@tollgate/fastify';
 * await app.register(tollgate, { rules: [{ name: 'ip', rate: '100/min' }], trustProxy: 'loopback' });
 * app.post('/login', { config: { rateLimit: { rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] } } }, login);
 * app.get('/healthz', { config: { rateLimit: false } }, () => 'ok');
 */
export const tollgate = fp(tollgatePlugin, { name: '@tollgate/fastify', fastify: '5.x' });
