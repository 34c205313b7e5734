/**
 * The Fastify plugin: `await app.register(tollgate, { rules, ... })`.
 *
 * Wrapped with fastify-plugin, so it acts in the scope it is registered in (and that
 * scope's children) and nowhere else: registered inside a prefix-scoped plugin it
 * limits that scope only. Nothing is added to a scope-wide hook list. Instead an
 * `onRoute` hook gives every route of the scope its own decision hook, built once when
 * the route is declared:
 *
 * - no `config.rateLimit`: the plugin-level stack (one limiter and one hook shared by
 *   every such route);
 * - `config.rateLimit: { rules }`: the plugin-level stack extended with the route's
 *   rules (`limiter.extend`), decided as one all-or-nothing stack;
 * - `config.rateLimit: false`: no hook at all.
 *
 * Registrations stack: a route in the scope of two registrations (say one at the root,
 * one in `/api`) gets both hooks, outer first; their draft-10 items are appended and
 * `request.rateLimit` merges both decisions. A route's `config.rateLimit.rules` join the
 * innermost registration that sees the route (the one registered last along the
 * route's scope chain), so they are counted once.
 */
import {
  createLimiter,
  guardAppFn,
  guardRules,
  type KeyFn,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  type Rule,
} from '@tollgate/core';
import type { FastifyInstance, FastifyPluginCallback, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { type Decide, decider } from './decide.js';
import { normalise, routeOption, type TollgateHook, type TollgateOptions } from './options.js';

/** The registration that owns route-level rules in a scope (inherited by child scopes). */
const OWNER = Symbol.for('tollgate.fastify.owner');
/** Marks tollgate's own hook functions in a route's hook lists. */
const MARK = Symbol.for('tollgate.fastify.hook');

type HookFn = ((...args: never[]) => void) & { [MARK]?: true };
type Scope = FastifyInstance & { [OWNER]?: object };

/** The same decision as a `preParsing` hook, whose callback comes fourth. */
function asHook(decide: Decide, hook: TollgateHook): HookFn {
  const fn: HookFn =
    hook === 'preParsing'
      ? function tollgatePreParsing(request: FastifyRequest, reply, _payload: unknown, done) {
          decide(request, reply, done);
        }
      : function tollgateHook(request: FastifyRequest, reply, done) {
          decide(request, reply, done);
        };
  fn[MARK] = true;
  return fn;
}

/**
 * Adds `fn` to a route's own hook list without touching the list the route was declared
 * with (Fastify copies it to the implicit HEAD route). Early hooks go before the route's
 * own hooks, so a refusal comes before their work; `preValidation` and `preHandler`
 * go after them, so keys can read what the route's own hooks (authentication) set.
 */
function install(route: RouteOptions, hook: TollgateHook, fn: HookFn): void {
  const r = route as unknown as Record<TollgateHook, HookFn | HookFn[] | undefined>;
  const existing = r[hook];
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  if (hook === 'onRequest' || hook === 'preParsing') {
    let at = 0;
    while (at < list.length && (list[at] as HookFn)[MARK] === true) at++;
    r[hook] = [...list.slice(0, at), fn, ...list.slice(at)];
  } else {
    r[hook] = [...list, fn];
  }
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

function register(fastify: FastifyInstance, options: TollgateOptions): void {
  const o = normalise(options);
  // One store for the plugin-level stack and every route extension, so that route rules
  // naming the same group share a counter even without plugin-level rules.
  const ownStore = o.store === undefined ? new MemoryStore(o.clock ? { clock: o.clock } : {}) : undefined;
  const common: Omit<LimiterOptions<FastifyRequest>, 'rules'> = {
    store: o.store ?? (ownStore as MemoryStore),
    ...(o.clock !== undefined ? { clock: o.clock } : {}),
    ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
    defaultKey: guardAppFn(o.defaultKey) as KeyFn<FastifyRequest>,
  };
  const rules = guardRules(o.rules, 'rules');
  const base = rules.length > 0 ? createLimiter<FastifyRequest>({ rules, ...common }) : undefined;
  const baseDecide = base === undefined ? undefined : decider(base, o);
  const baseHooks = new Map<TollgateHook, HookFn>();
  const owner = {};

  function baseHook(hook: TollgateHook): HookFn {
    let fn = baseHooks.get(hook);
    if (fn === undefined) {
      fn = asHook(baseDecide as Decide, hook);
      baseHooks.set(hook, fn);
    }
    return fn;
  }

  function routeLimiter(routeRules: Rule<FastifyRequest>[], where: string): Limiter<FastifyRequest> {
    const guarded = guardRules(routeRules, `${where} config.rateLimit.rules`);
    return base === undefined ? createLimiter<FastifyRequest>({ rules: guarded, ...common }) : base.extend(guarded);
  }

  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  (fastify as Scope)[OWNER] = owner;

  fastify.addHook('onRoute', function tollgateRoute(this: Scope, route) {
    const config = (route.config as { rateLimit?: unknown } | undefined)?.rateLimit;
    if (config === false) return;
    const where = `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`;
    const own = config === undefined ? {} : routeOption(config, where);
    const hook = own.hook ?? o.hook;
    // Route rules belong to the innermost registration only: the others add their own stack.
    if (own.rules !== undefined && own.rules.length > 0 && this[OWNER] === owner) {
      install(route, hook, asHook(decider(routeLimiter(own.rules, where), o), hook));
      return;
    }
    if (baseDecide !== undefined) install(route, hook, baseHook(hook));
  });

  if (ownStore !== undefined) {
    fastify.addHook('onClose', function closeTollgateStore(_instance, next) {
      ownStore.close().then(() => next(), next);
    });
  }
}

/**
 * Rate-limits the routes of the scope it is registered in.
 * @example
 * import tollgate, { user } from '@tollgate/fastify';
 * await app.register(tollgate, { rules: [{ name: 'ip', rate: '100/min' }], trustProxy: 'loopback' });
 * app.post('/login', { config: { rateLimit: { rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] } } }, login);
 * app.get('/healthz', { config: { rateLimit: false } }, () => 'ok');
 */
export const tollgate = fp(tollgatePlugin, { name: '@tollgate/fastify', fastify: '5.x' });
