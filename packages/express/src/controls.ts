/**
 * The controls beside the limiter for Express 4 and 5: `slowDown`,
 * `concurrency` and `shed` as middleware. Their flows are core's (`@tollgate/core/http`):
 * slots and in-flight counts are released exactly once when the request is over
 * (finished, closed, or abandoned with its connection, pipelined requests included).
 */
import type { ConcurrencyLimit, Shedder, ShedOptions, ThrottleResult } from '@tollgate/core';
import { type ConcurrencyFlowOptions, concurrencyFlow, type SlowDownFlowOptions, shedFlow, slowDownFlow } from '@tollgate/core/http';
import type { Request, RequestHandler } from 'express';
import { expressPort } from './rate-limit.js';

declare global {
  namespace Express {
    interface Request {
      /** What the slow-down throttle decided for this request (hits and delay). */
      slowDown?: ThrottleResult;
    }
  }
}

/** Options every control's middleware shares for finding the client address (the default `ip()` key). */
export type { ClientAddressOptions } from '@tollgate/core/http';

export type SlowDownOptions = SlowDownFlowOptions<Request>;
export type ConcurrencyMiddlewareOptions = ConcurrencyFlowOptions<Request>;

export type SlowDownMiddleware = RequestHandler & {
  /** Forgets the request key's arrivals. */
  reset(req: Request): Promise<void>;
  /** Closes the store if the throttle created it. */
  close(): Promise<void>;
};

export type ConcurrencyMiddleware = RequestHandler & {
  /** The core limit (for `count`, `held`, `waiting`). */
  readonly limit: ConcurrencyLimit<Request>;
  /** Refuses waiters, stops timers, closes a store it created. */
  close(): Promise<void>;
};

export type ShedMiddleware = RequestHandler & {
  /** The core shedder (for `inFlight` and `pressure()`). */
  readonly shedder: Shedder<Request>;
  /** Stops the event-loop monitor. */
  close(): void;
};

/**
 * Delays requests from a key once it has sent more than `delayAfter` in `window`.
 * @example app.use(slowDown({ window: '10s', delayAfter: 5, delay: 500 }));
 */
export function slowDown(options: SlowDownOptions): SlowDownMiddleware {
  const { stage, throttle, close } = slowDownFlow(expressPort, options);
  const middleware = function slowDown(req, res, next) {
    stage(req, res, next);
  } as SlowDownMiddleware;
  middleware.reset = (req) => throttle.reset(req);
  middleware.close = close;
  return middleware;
}

/**
 * Limits the requests in flight per key (429) and/or in total (503).
 * @example app.use('/reports', concurrency({ max: 2, global: 50, queue: 10, queueTimeout: '5s' }));
 */
export function concurrency(options: ConcurrencyMiddlewareOptions): ConcurrencyMiddleware {
  const { stage, limit, close } = concurrencyFlow(expressPort, options);
  const middleware = function concurrency(req, res, next) {
    stage(req, res, next);
  } as ConcurrencyMiddleware;
  Object.defineProperty(middleware, 'limit', { value: limit });
  middleware.close = close;
  return middleware;
}

/**
 * Answers 503 with `Retry-After` while the server is overloaded; mount it first.
 * @example app.use(shed({ maxInFlight: 500, maxEventLoopDelay: '200ms', tenant: (req) => req.get('x-tenant') }));
 */
export function shed(options: ShedOptions<Request>): ShedMiddleware {
  const { stage, shedder, close } = shedFlow(expressPort, options);
  const middleware = function shed(req, res, next) {
    stage(req, res, next);
  } as ShedMiddleware;
  Object.defineProperty(middleware, 'shedder', { value: shedder });
  middleware.close = close;
  return middleware;
}
