/**
 * The controls beside the limiter for Koa: `slowDown`, `concurrency`, `shed` and
 * `limitRate` as middleware. Their flows are core's (`@tollgate/core/http`): slots and
 * in-flight counts are released exactly once when the request is over (finished, closed,
 * or abandoned with its connection, pipelined requests included); `limitRate` paces the
 * Node response Koa writes the body to (`@tollgate/core/node`).
 */
import type { ShedOptions, ThrottleResult } from '@tollgate/core';
import {
  type ConcurrencyCarried,
  type ConcurrencyFlowOptions,
  controlMakers,
  type LimitRateCarried,
  type LimitRateFlowOptions,
  type ShedCarried,
  type SlowDownCarried,
  type SlowDownFlowOptions,
} from '@tollgate/core/http';
import type { Context, Middleware } from 'koa';
import { asMiddleware, koaPort } from './rate-limit.js';

declare module 'koa' {
  interface DefaultState {
    /** What the slow-down throttle decided for this request (hits and delay). */
    slowDown?: ThrottleResult;
  }
}

export type { ClientAddressOptions } from '@tollgate/core/http';
/** Options of `slowDown`: the throttle's (docs/slow-down.md), with functions of `ctx`. */
export type SlowDownOptions = SlowDownFlowOptions<Context>;
/** Options of `concurrency`: the limit's (docs/concurrency.md), with functions of `ctx`. */
export type ConcurrencyMiddlewareOptions = ConcurrencyFlowOptions<Context>;
/** Options of `limitRate`: the byte-rate limit's (docs/limit-rate.md), with functions of `ctx`. */
export type LimitRateOptions = LimitRateFlowOptions<Context>;
/** The throttle as Koa middleware, with `reset(ctx)` and `close()`. */
export type SlowDownMiddleware = Middleware & SlowDownCarried<Context>;
/** The concurrency limit as Koa middleware, with its core `limit` and `close()`. */
export type ConcurrencyMiddleware = Middleware & ConcurrencyCarried<Context>;
/** Load shedding as Koa middleware, with its core `shedder` and `close()`. */
export type ShedMiddleware = Middleware & ShedCarried<Context>;
/** The byte-rate limit as Koa middleware, with its core `limit` and `close()`. */
export type LimitRateMiddleware = Middleware & LimitRateCarried<Context>;

/** A control's stage as Koa middleware named after it, carrying its `close` and core object. */
const controls = controlMakers(koaPort, (name, stage, carried): Middleware => Object.assign(asMiddleware(name, stage), carried));

/**
 * Delays requests from a key once it has sent more than `delayAfter` in `window`.
 * @example app.use(slowDown({ window: '10s', delayAfter: 5, delay: 500 }));
 */
export const slowDown = controls.slowDown as (options: SlowDownOptions) => SlowDownMiddleware;

/**
 * Limits the requests in flight per key (429) and/or in total (503).
 * @example router.get('/reports', concurrency({ max: 2, global: 50, queue: 10, queueTimeout: '5s' }), report);
 */
export const concurrency = controls.concurrency as (options: ConcurrencyMiddlewareOptions) => ConcurrencyMiddleware;

/**
 * Answers 503 with `Retry-After` while the server is overloaded; mount it first.
 * @example app.use(shed({ maxInFlight: 500, maxEventLoopDelay: '200ms', tenant: (ctx) => ctx.get('x-tenant') }));
 */
export const shed = controls.shed as (options: ShedOptions<Context>) => ShedMiddleware;

/**
 * Paces response bodies with a token bucket on bytes per key (all of a client's responses
 * share it); refuses nothing. Mount it before the middleware that sets the body.
 * @example router.get('/downloads/:file', limitRate({ rate: '2MB/s', burst: '16MB' }), download);
 */
export const limitRate = controls.limitRate as (options: LimitRateOptions) => LimitRateMiddleware;
