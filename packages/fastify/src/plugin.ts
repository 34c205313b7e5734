/**
 * The Fastify plugin, `await app.register(tollgate, { rules, ... })`, and the Fastify port
 * of core's request pipeline (`@tollgate/core/http`).
 *
 * Wrapped with fastify-plugin, it acts in the scope it is registered in and its children.
 * Each route gets its decision hook once, when declared (`onRoute`): the plugin-level
 * stack, that stack with the route's `config.rateLimit.rules` (or those alone, `mode:
 * 'replace'`), or none (`config.rateLimit: false`). Registrations stack, outer first; a
 * route's rules join the innermost registration that sees it. Routes declared before the
 * plugin loaded (`app.register` without `await`) never reach `onRoute`: a scope-level hook
 * decides those, so no route is left unlimited whatever the order.
 */
import { createRateLimit, type Decide, groupOperations, type HttpPort, lowerHeaderName as lower } from '@tollgate/core/http';
import { nodeOperations } from '@tollgate/core/node';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { normalise, routeOption, type TollgateHook, type TollgateOptions } from './options.js';

/** Headers through `reply.header` (names lower-cased, as Fastify stores them), the answer through `reply.send`. */
export const fastifyPort: HttpPort<FastifyRequest, FastifyReply, HookHandlerDoneFunction> = {
  name: 'fastify',
  ...nodeOperations<FastifyRequest, FastifyReply>(
    (request) => request.raw,
    (reply) => reply.raw,
  ),
  getHeader: (reply, name) => reply.getHeader(lower(name)),
  setHeader: (reply, name, value) => {
    reply.header(lower(name), value);
  },
  status: (reply, code) => {
    reply.code(code);
  },
  // Bytes, not a string: Fastify appends `; charset=utf-8` to a JSON type sent as a string,
  // and every port sends core's Content-Type as it is (`application/problem+json`).
  send: (reply, status, contentType, body) => {
    reply.code(status).type(contentType).send(Buffer.from(body));
  },
  pass: (done) => done(),
  fail: (done, err) => done(err instanceof Error ? err : new Error(String(err))),
};

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

/** The decision as a hook of kind `hook` (a `preParsing` hook's callback comes fourth), marked as tollgate's. */
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
 * Adds the decision to a route's own hook list (a new list: the route's is left as it was
 * declared). Early hooks go before the route's own, after tollgate's (a refusal comes
 * before their work); `preValidation` and `preHandler` after them (keys can read what
 * authentication set).
 */
function install(route: RouteOptions, hook: TollgateHook, decide: Hook): void {
  const r = route as unknown as Record<TollgateHook, HookFn | HookFn[] | undefined>;
  const list = [r[hook] ?? []].flat();
  let at = list.length;
  if (hook === 'onRequest' || hook === 'preParsing') for (at = 0; at < list.length && (list[at] as HookFn)[MARK] === true; ) at++;
  r[hook] = [...list.slice(0, at), asHook(decide, hook), ...list.slice(at)];
}

// Async, so that bad options (a throw) fail the registration: avvio does not catch a throw.
const tollgatePlugin: FastifyPluginAsync<TollgateOptions> = async function tollgate(fastify, options) {
  const o = normalise(options);
  const { handler } = o;
  const core = createRateLimit(fastifyPort, o, {
    // Each route gets its whole stack (core.stack), never a route stage (core.route).
    routeStages: false,
    ...(typeof handler === 'function' ? { handler: (req, res, _done, d) => handler(req, res, d) } : {}),
  });
  const owner = {};
  /** A route's hook and decision here: its own stack if it has rules this registration owns, else the plugin-level one. */
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
  // `app.tollgate`: a second registration, or one in a child scope, joins the first's group.
  const operations = groupOperations(fastify.tollgate, core);
  if (operations !== undefined) fastify.decorate('tollgate', operations);
  (fastify as Scope)[OWNER] = owner;
  if (fastify.printRoutes() !== '(empty tree)') lateRoutes(fastify as Scope);

  fastify.addHook('onRoute', function tollgateRoute(this: Scope, route) {
    const config = (route.config ?? {}) as Config;
    const d = decisionFor(config, `${[route.method].flat().join(',')} ${route.url}`, this[OWNER] === owner);
    // The config is copied into the route's context after this hook: mark it seen.
    route.config = { ...config, [SEEN]: new Set([...(config[SEEN] ?? []), owner]) } as NonNullable<typeof route.config>;
    if (d !== undefined) install(route, d.hook, d.decide);
  });

  /** A scope-level hook for the routes declared before this plugin loaded, which `onRoute` never saw. */
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

  fastify.addHook('onClose', () => core.close());
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
