/**
 * The controls beside the limiter for Fastify 5, over core's flows (`@tollgate/core/http`):
 * `slowDown`, `concurrency` and `shed`, each a plugin adding one `onRequest` hook in the
 * scope it is registered in, or that hook for one route (`slowDownHook`, ...). A route
 * opts out with `config: { slowDown: false }` (`concurrency`, `shed` alike).
 * @example await app.register(concurrency, { max: 3, global: 100 });
 */
import type { ByteRateLimit, ShedOptions } from '@tollgate/core';
import { type ConcurrencyFlowOptions, controlMakers, type LimitRateFlowOptions, type SlowDownFlowOptions } from '@tollgate/core/http';
import type { FastifyPluginAsync, FastifyPluginOptions, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { fastifyPort } from './plugin.js';

export type { ClientAddressOptions } from '@tollgate/core/http';
export type SlowDownOptions = SlowDownFlowOptions<FastifyRequest>;
export type ConcurrencyPluginOptions = ConcurrencyFlowOptions<FastifyRequest>;
export type LimitRatePluginOptions = LimitRateFlowOptions<FastifyRequest>;

/** An `onRequest` hook with the control behind it; `close` releases its timers and store. */
export type ControlHook = onRequestHookHandler & { close(): Promise<void> };

/** The controls' hooks over the Fastify port, passing routes with `config[name]: false`. */
const hooks = controlMakers(fastifyPort, (name, stage, carried) => {
  const hook = function tollgateControl(request, reply, done) {
    if (request.routeOptions.config?.[name] === false) done();
    else stage(request, reply, done);
  } as ControlHook;
  // The byte-rate limit's figures ride on its hook.
  if (name === 'limitRate' && 'limit' in carried) Object.defineProperty(hook, 'limit', { value: carried.limit });
  // A promise for every control (shed's own close is synchronous).
  hook.close = async () => carried.close();
  return hook;
});

/** The slow-down throttle as an `onRequest` hook: `app.post('/login', { onRequest: slowDownHook({ ... }) }, login)`. */
export const slowDownHook: (options: SlowDownOptions) => ControlHook = hooks.slowDown;
/** The concurrency limit as an `onRequest` hook: `app.get('/export', { onRequest: concurrencyHook({ max: 1 }) }, exportCsv)`. */
export const concurrencyHook: (options: ConcurrencyPluginOptions) => ControlHook = hooks.concurrency;
/** Load shedding as an `onRequest` hook (usually the `shed` plugin, registered first). */
export const shedHook: (options: ShedOptions<FastifyRequest>) => ControlHook = hooks.shed;
/** The byte-rate limit's hook, with the core limit (its figures and `active` responses). */
export type LimitRateHook = ControlHook & { readonly limit: ByteRateLimit<FastifyRequest> };
/** The byte-rate limit as an `onRequest` hook: `app.get('/file', { onRequest: limitRateHook({ rate: '1MB/s' }) }, send)`. */
export const limitRateHook = hooks.limitRate as (options: LimitRatePluginOptions) => LimitRateHook;

// The plugins' types are written out: inferred, `shed`'s options expanded FastifyRequest's
// defaults into 'fastify/types/type-provider', which fastify's exports map does not publish
// (TS2307 for users on module node16/nodenext with skipLibCheck: false).
/**
 * A control's hook as a plugin on the scope it is registered in, closed with the app.
 * Async, so that bad options (a throw) fail the registration: avvio does not catch a throw.
 */
function asPlugin<O extends FastifyPluginOptions>(make: (options: O) => ControlHook, name: string): FastifyPluginAsync<O> {
  const plugin: FastifyPluginAsync<O> = async (app, options) => {
    const hook = make(options);
    app.addHook('onClose', () => hook.close());
    app.addHook('onRequest', hook);
  };
  return fp(plugin, { name: `@tollgate/fastify/${name}`, fastify: '5.x' });
}

/** The slow-down throttle as a Fastify plugin. */
export const slowDown: FastifyPluginAsync<SlowDownOptions> = asPlugin(slowDownHook, 'slow-down');
/** The concurrency limit as a Fastify plugin: 429 per key, 503 global. */
export const concurrency: FastifyPluginAsync<ConcurrencyPluginOptions> = asPlugin(concurrencyHook, 'concurrency');
/** Load shedding as a Fastify plugin: 503 + Retry-After, decided first. */
export const shed: FastifyPluginAsync<ShedOptions<FastifyRequest>> = asPlugin(shedHook, 'shed');
/** The byte-rate limit as a Fastify plugin: paces response bodies per key, refuses nothing. */
export const limitRate: FastifyPluginAsync<LimitRatePluginOptions> = asPlugin(limitRateHook, 'limit-rate');
