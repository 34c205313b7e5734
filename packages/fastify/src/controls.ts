/**
 * The controls beside the limiter for Fastify 5: `slowDown`,
 * `concurrency` and `shed`, each a plugin (wrapped with fastify-plugin, so it acts in
 * the scope it is registered in) adding one `onRequest` hook, or the same hook for one
 * route (`slowDownHook`, ...). Their flows are core's (`@tollgate/core/http`). A route
 * opts out with `config: { slowDown: false }` (`concurrency`, `shed` alike).
 * @example
 * await app.register(shed, { maxInFlight: 500 });
 * await app.register(concurrency, { max: 3, global: 100 });
 */
import type { ShedOptions } from '@tollgate/core';
import {
  type ConcurrencyFlowOptions,
  concurrencyFlow,
  type SlowDownFlowOptions,
  type Stage,
  shedFlow,
  slowDownFlow,
} from '@tollgate/core/http';
import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
} from 'fastify';
import fp from 'fastify-plugin';
import { fastifyPort } from './port.js';

export type { ClientAddressOptions } from '@tollgate/core/http';
export type SlowDownOptions = SlowDownFlowOptions<FastifyRequest>;
export type ConcurrencyPluginOptions = ConcurrencyFlowOptions<FastifyRequest>;

/** An `onRequest` hook with the control behind it; `close` releases its timers and store. */
export type ControlHook = onRequestHookHandler & { close(): Promise<void> };

type Name = 'slowDown' | 'concurrency' | 'shed';

function asHook(name: Name, stage: Stage<FastifyRequest, FastifyReply, HookHandlerDoneFunction>, close: () => Promise<void>): ControlHook {
  const hook = function tollgateControl(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (request.routeOptions.config?.[name] === false) done();
    else stage(request, reply, done);
  } as ControlHook;
  hook.close = close;
  return hook;
}

/** The slow-down throttle as an `onRequest` hook: `app.post('/login', { onRequest: slowDownHook({ ... }) }, login)`. */
export function slowDownHook(options: SlowDownOptions): ControlHook {
  const { stage, throttle } = slowDownFlow(fastifyPort, options);
  return asHook('slowDown', stage, () => throttle.close());
}

/** The concurrency limit as an `onRequest` hook: `app.get('/export', { onRequest: concurrencyHook({ max: 1 }) }, exportCsv)`. */
export function concurrencyHook(options: ConcurrencyPluginOptions): ControlHook {
  const { stage, limit } = concurrencyFlow(fastifyPort, options);
  return asHook('concurrency', stage, () => limit.close());
}

/** Load shedding as an `onRequest` hook (usually the `shed` plugin, registered first). */
export function shedHook(options: ShedOptions<FastifyRequest>): ControlHook {
  const { stage, shedder } = shedFlow(fastifyPort, options);
  return asHook('shed', stage, async () => shedder.close());
}

/** Registers a control hook on a scope and closes it with the app. */
function asPlugin<O>(make: (options: O) => ControlHook) {
  return function controlPlugin(app: FastifyInstance, options: O, done: (err?: Error) => void): void {
    const hook = make(options);
    app.addHook('onClose', (_instance, next) => {
      hook.close().then(() => next(), next);
    });
    app.addHook('onRequest', hook);
    done();
  };
}

// The plugins' types are written out: inferred, `shed`'s options expanded FastifyRequest's
// defaults into 'fastify/types/type-provider', which fastify's exports map does not publish
// (TS2307 for users on module node16/nodenext with skipLibCheck: false).
/** The slow-down throttle as a Fastify plugin. */
export const slowDown: FastifyPluginCallback<SlowDownOptions> = fp(asPlugin(slowDownHook), {
  name: '@tollgate/fastify/slow-down',
  fastify: '5.x',
});
/** The concurrency limit as a Fastify plugin: 429 per key, 503 global. */
export const concurrency: FastifyPluginCallback<ConcurrencyPluginOptions> = fp(asPlugin(concurrencyHook), {
  name: '@tollgate/fastify/concurrency',
  fastify: '5.x',
});
/** Load shedding as a Fastify plugin: 503 + Retry-After, decided first. */
export const shed: FastifyPluginCallback<ShedOptions<FastifyRequest>> = fp(asPlugin(shedHook), {
  name: '@tollgate/fastify/shed',
  fastify: '5.x',
});
