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
import { keyOperations, type Limiter, type OperationSource, type RuleChanges, TollgateError } from '@tollgate/core';
import { createRateLimit, type Decide } from '@tollgate/core/http';
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import type { TollgateInstance } from './augment.js';
import { normalise, type RouteRateLimit, routeOption, type TollgateHook, type TollgateOptions } from './options.js';
import { fastifyPort } from './port.js';

type Hook = Decide<FastifyRequest, FastifyReply, HookHandlerDoneFunction>;
/** The registration that owns route-level rules in a scope (inherited by child scopes). */
const OWNER = Symbol.for('tollgate.fastify.owner');
/** Marks tollgate's own hook functions in a route's hook lists. */
const MARK = Symbol.for('tollgate.fastify.hook');
/** Marks the config of a route the `onRoute` hook saw, per registration. */
const SEEN = Symbol('tollgate.fastify.seen');
/** The registrations (their rules by name) behind an instance's `tollgate` decoration. */
const SOURCES = Symbol.for('tollgate.fastify.sources');
const REGISTRATIONS = Symbol.for('tollgate.fastify.registrations');

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
  const baseHooks = new Map<TollgateHook, HookFn>();
  const baseHook = (hook: TollgateHook): HookFn => {
    const fn = baseHooks.get(hook) ?? asHook(core.handle, hook);
    baseHooks.set(hook, fn);
    return fn;
  };
  /** The decision of a route stack, built once per route config. */
  const routeDecide = (own: RouteRateLimit, where: string): Hook =>
    core.stack(core.routeLimiter(own.rules ?? [], own.mode ?? 'add', `${where} config.rateLimit.rules`) as Limiter<FastifyRequest>);
  const owns = (scope: Scope, own: RouteRateLimit) => own.rules !== undefined && own.rules.length > 0 && scope[OWNER] === owner;
  const wantsBase = core.active;

  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  decorateOperations(fastify, core.operationSource, core);
  (fastify as Scope)[OWNER] = owner;

  if (fastify.printRoutes() !== '(empty tree)') lateRoutes(fastify as Scope);

  fastify.addHook('onRoute', function tollgateRoute(this: Scope, route) {
    const config = (route.config ?? {}) as Config;
    if (config.rateLimit === false) return;
    const where = `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`;
    const own = config.rateLimit === undefined ? {} : routeOption(config.rateLimit, where);
    const hook = own.hook ?? o.hook;
    // The config is copied into the route's context after this hook: mark it seen.
    route.config = { ...config, [SEEN]: new Set([...(config[SEEN] ?? []), owner]) } as NonNullable<typeof route.config>;
    if (owns(this, own)) install(route, hook, asHook(routeDecide(own, where), hook));
    else if (wantsBase) install(route, hook, baseHook(hook));
  });

  /** A scope-level hook for routes declared before this plugin loaded, which `onRoute` never saw. */
  function lateRoutes(scope: Scope): void {
    const stacks = new WeakMap<object, Hook | null>();
    scope.addHook(o.hook as 'onRequest', function tollgateLateRoute(request, reply, done) {
      const config = request.routeOptions.config as Config;
      if (config[SEEN]?.has(owner)) return done();
      let decide = stacks.get(config);
      if (decide === undefined) {
        const where = `${request.method} ${request.routeOptions.url}`;
        const own = config.rateLimit === false ? false : config.rateLimit === undefined ? {} : routeOption(config.rateLimit, where);
        decide =
          own === false ? null : own.rules !== undefined && own.rules.length > 0 ? routeDecide(own, where) : wantsBase ? core.handle : null;
        stacks.set(config, decide);
      }
      if (decide === null) done();
      else decide(request, reply, done);
    });
  }

  fastify.addHook('onClose', function closeTollgateStore(_instance, next) {
    core.close().then(() => next(), next);
  });
}

/** What `app.tollgate.update` reaches of one registration. */
type Registration = { update(ruleName: string, changes: RuleChanges<FastifyRequest>): void };

/**
 * `app.tollgate`: the operations by key (get, reset, block, unblock, penalize, reward) over
 * the rules of every registration that sees this instance, plugin-level and route-level,
 * and `update`, applied to every registration having the rule (plugin-level, tier or route
 * rule; TG_UNKNOWN_RULE when none has it). A registration in a scope that already has it (a
 * second one, or one in a child scope) adds its rules to it; a rule is looked up in the
 * order of registration.
 */
function decorateOperations(fastify: FastifyInstance, source: OperationSource, registration: Registration): void {
  const existing = (fastify as { tollgate?: { [SOURCES]?: OperationSource[]; [REGISTRATIONS]?: Registration[] } }).tollgate;
  if (existing?.[SOURCES] !== undefined) {
    existing[SOURCES].push(source);
    existing[REGISTRATIONS]?.push(registration);
    return;
  }
  const sources = [source];
  const registrations = [registration];
  const instance: TollgateInstance = {
    update(ruleName, changes) {
      let unknown: unknown;
      let found = false;
      for (const r of registrations) {
        try {
          r.update(ruleName, changes);
          found = true;
        } catch (err) {
          if ((err as { code?: unknown }).code !== 'TG_UNKNOWN_RULE') throw err;
          unknown ??= err;
        }
      }
      if (!found) {
        throw (
          unknown ?? new TollgateError('TG_UNKNOWN_RULE', `update: no tollgate registration has a rule named ${JSON.stringify(ruleName)}.`)
        );
      }
    },
  };
  fastify.decorate('tollgate', { ...keyOperations(sources), ...instance, [SOURCES]: sources, [REGISTRATIONS]: registrations });
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
