/**
 * The controls beside the limiter for Fastify 5 (SPEC 8.1, 8.3, 8.4): `slowDown`,
 * `concurrency` and `shed`, each a small plugin (wrapped with fastify-plugin, so it acts
 * in the scope it is registered in) that adds one `onRequest` hook: decided before the
 * body is read. Deciding is core's (`createThrottle`, `createConcurrency`,
 * `createShedder`), exactly as in @tollgate/express; this file is Fastify plumbing.
 *
 * A route opts out with `config: { slowDown: false }` (`concurrency`, `shed` alike). For a
 * control on one route only, the same hooks come as factories (`slowDownHook`,
 * `concurrencyHook`, `shedHook`) for the route's `onRequest` option.
 * Slots and in-flight counts are released once, when `reply.raw` finishes or closes.
 *
 * @example
 * await app.register(shed, { maxInFlight: 500 });
 * await app.register(slowDown, { window: '10s', delayAfter: 5, delay: 500 });
 * await app.register(concurrency, { max: 3, global: 100 });
 */
import {
  acquireWhileConnected,
  applyHeaders,
  type ClientAddressOptions,
  type ConcurrencyOptions,
  type ConcurrencyOutcome,
  compileHeaders,
  concurrencyDecision,
  concurrencyHeaderFields,
  concurrencyRefusal,
  createConcurrency,
  createShedder,
  createThrottle,
  type HeaderField,
  type HeadersOption,
  hold,
  isGone,
  onceDone,
  publishControl,
  publishStoreError,
  type Refusal,
  type ShedOptions,
  shedDecision,
  shedRefusal,
  splitClientAddress,
  type ThrottleOptions,
  type ThrottleResult,
  type Timers,
  throttleDecision,
} from '@tollgate/core';
import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
} from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** What the slow-down throttle decided for this request (hits and delay). */
    slowDown?: ThrottleResult;
  }
  interface FastifyContextConfig {
    /** `false` turns the slow-down throttle off for this route. */
    slowDown?: false;
    /** `false` turns the concurrency limit off for this route. */
    concurrency?: false;
    /** `false` exempts this route from load shedding (health checks). */
    shed?: false;
  }
}

/** Options every control plugin shares for finding the client address (the default `ip()` key). */
export type { ClientAddressOptions };

export interface SlowDownOptions extends Omit<ThrottleOptions<FastifyRequest>, 'defaultKey'>, ClientAddressOptions {
  /** Rate-limit headers carrying the throttle's figures. @default 'draft-10' */
  headers?: HeadersOption;
  /** Where delays get their timers (tests: `ManualTimers`). @default systemTimers */
  timers?: Timers;
}

export interface ConcurrencyPluginOptions extends Omit<ConcurrencyOptions<FastifyRequest>, 'defaultKey'>, ClientAddressOptions {
  /** Send draft-10 items with `qu="concurrent-requests"`. @default true */
  headers?: boolean;
}

function writeFields(reply: FastifyReply, fields: readonly HeaderField[]): void {
  applyHeaders(
    fields,
    (name) => reply.getHeader(name),
    (name, value) => reply.header(name, value),
  );
}

function sendRefusal(reply: FastifyReply, r: Refusal): void {
  reply.code(r.status);
  for (const [name, value] of r.headers) reply.header(name, value);
  reply.type(r.contentType).send(JSON.stringify(r.body));
}

const off = (request: FastifyRequest, name: 'slowDown' | 'concurrency' | 'shed') => request.routeOptions.config?.[name] === false;

/** An `onRequest` hook with the control behind it; `close` releases its timers and store. */
export type ControlHook = onRequestHookHandler & { close(): Promise<void> };

/**
 * The slow-down throttle as an `onRequest` hook, for one route or a scope:
 * `app.post('/login', { onRequest: slowDownHook({ window: '15m', delayAfter: 3 }) }, login)`.
 * Call `close()` when the app closes (the `slowDown` plugin does this for you).
 */
export function slowDownHook(options: SlowDownOptions): ControlHook {
  const { headers, timers, ...rest } = options ?? ({} as SlowDownOptions);
  const [core, defaultKey] = splitClientAddress<FastifyRequest, typeof rest>(rest);
  const throttle = createThrottle<FastifyRequest>({ ...core, defaultKey } as ThrottleOptions<FastifyRequest>);
  const format = compileHeaders(headers);
  const clock = core.clock;
  const hook = function tollgateSlowDown(request: FastifyRequest, reply: FastifyReply, next: HookHandlerDoneFunction): void {
    if (off(request, 'slowDown')) {
      next();
      return;
    }
    throttle.hit(request).then(
      (t) => {
        if (t === undefined) {
          next();
          return;
        }
        request.slowDown = t;
        const at = clock?.now() ?? Date.now();
        if (format !== undefined) writeFields(reply, format([t.result], at));
        publishControl(request, throttle.name, () => throttleDecision(t, at));
        if (t.delayMs === 0) {
          next();
          return;
        }
        // A client that leaves while delayed never reaches the handler.
        hold(reply.raw, t.delayMs, timers).then((stillThere) => {
          if (stillThere) next();
        });
      },
      (err) => {
        // It slows, it never blocks: a failing store lets the request through undelayed.
        publishStoreError(err, request, throttle.name, 'allow');
        next();
      },
    );
  } as ControlHook;
  hook.close = () => throttle.close();
  return hook;
}

/**
 * The concurrency limit as an `onRequest` hook, for one route or a scope:
 * `app.get('/export', { onRequest: concurrencyHook({ max: 1 }) }, exportCsv)`.
 */
export function concurrencyHook(options: ConcurrencyPluginOptions): ControlHook {
  const { headers = true, ...rest } = options ?? ({} as ConcurrencyPluginOptions);
  const [core, defaultKey] = splitClientAddress<FastifyRequest, typeof rest>(rest);
  const limit = createConcurrency<FastifyRequest>({ ...core, defaultKey } as ConcurrencyOptions<FastifyRequest>);

  function answer(request: FastifyRequest, reply: FastifyReply, next: HookHandlerDoneFunction, o: ConcurrencyOutcome | undefined): void {
    if (o === undefined) {
      next();
      return;
    }
    if (!o.admitted && o.reason === 'aborted') return; // the client is gone
    publishControl(request, limit.name, () => concurrencyDecision(o));
    if (!o.admitted) {
      if (headers) writeFields(reply, concurrencyHeaderFields(o.figures));
      sendRefusal(reply, concurrencyRefusal(o));
      return;
    }
    if (isGone(reply.raw)) {
      o.release();
      return;
    }
    onceDone(reply.raw, o.release);
    if (headers) writeFields(reply, concurrencyHeaderFields(o.figures));
    next();
  }

  const hook = function tollgateConcurrency(request: FastifyRequest, reply: FastifyReply, next: HookHandlerDoneFunction): void {
    if (off(request, 'concurrency')) {
      next();
      return;
    }
    acquireWhileConnected(limit, request, reply.raw, reply, next, answer);
  } as ControlHook;
  hook.close = () => limit.close();
  return hook;
}

/** Load shedding as an `onRequest` hook (usually the `shed` plugin, registered first, is what you want). */
export function shedHook(options: ShedOptions<FastifyRequest>): ControlHook {
  const shedder = createShedder<FastifyRequest>(options);
  const hook = function tollgateShed(request: FastifyRequest, reply: FastifyReply, next: HookHandlerDoneFunction): void {
    if (off(request, 'shed')) {
      next();
      return;
    }
    const o = shedder.check(request);
    if (o === undefined) {
      next();
      return;
    }
    if (o.shed) {
      publishControl(request, 'shed', () => shedDecision(o));
      sendRefusal(reply, shedRefusal(o));
      return;
    }
    onceDone(reply.raw, o.release);
    next();
  } as ControlHook;
  hook.close = () => {
    shedder.close();
    return Promise.resolve();
  };
  return hook;
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
/** The slow-down throttle (SPEC 8.1) as a Fastify plugin. */
export const slowDown: FastifyPluginCallback<SlowDownOptions> = fp(asPlugin(slowDownHook), {
  name: '@tollgate/fastify/slow-down',
  fastify: '5.x',
});
/** The concurrency limit (SPEC 8.3) as a Fastify plugin: 429 per key, 503 global. */
export const concurrency: FastifyPluginCallback<ConcurrencyPluginOptions> = fp(asPlugin(concurrencyHook), {
  name: '@tollgate/fastify/concurrency',
  fastify: '5.x',
});
/** Load shedding (SPEC 8.4) as a Fastify plugin: 503 + Retry-After, decided first. */
export const shed: FastifyPluginCallback<ShedOptions<FastifyRequest>> = fp(asPlugin(shedHook), {
  name: '@tollgate/fastify/shed',
  fastify: '5.x',
});
