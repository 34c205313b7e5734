/**
 * The controls beside the limiter for Express 4 and 5: `slowDown`,
 * `concurrency` and `shed` as middleware. Their flows are core's (`@tollgate/core/http`):
 * slots and in-flight counts are released exactly once when the request is over
 * (finished, closed, or abandoned with its connection, pipelined requests included).
 */
import type { ByteRateLimit, ConcurrencyLimit, Shedder, ShedOptions, ThrottleResult } from '@tollgate/core';
import { type ConcurrencyFlowOptions, controlMakers, type LimitRateFlowOptions, type SlowDownFlowOptions } from '@tollgate/core/http';
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
export type LimitRateOptions = LimitRateFlowOptions<Request>;

export type LimitRateMiddleware = RequestHandler & {
  /** The core byte-rate limit (its figures and `active` responses). */
  readonly limit: ByteRateLimit<Request>;
  /** Closes a store it created; open responses go on unpaced. */
  close(): Promise<void>;
};

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

/** A control's stage as Express middleware named after it, carrying its `close` and core object. */
const controls = controlMakers(expressPort, (name, stage, carried): RequestHandler => {
  const middleware: RequestHandler = (req, res, next) => stage(req, res, next);
  Object.defineProperty(middleware, 'name', { value: name });
  return Object.assign(middleware, carried);
});

/**
 * Delays requests from a key once it has sent more than `delayAfter` in `window`.
 * @example app.use(slowDown({ window: '10s', delayAfter: 5, delay: 500 }));
 */
export function slowDown(options: SlowDownOptions): SlowDownMiddleware {
  return controls.slowDown(options) as SlowDownMiddleware;
}

/**
 * Limits the requests in flight per key (429) and/or in total (503).
 * @example app.use('/reports', concurrency({ max: 2, global: 50, queue: 10, queueTimeout: '5s' }));
 */
export function concurrency(options: ConcurrencyMiddlewareOptions): ConcurrencyMiddleware {
  return controls.concurrency(options) as ConcurrencyMiddleware;
}

/**
 * Answers 503 with `Retry-After` while the server is overloaded; mount it first.
 * @example app.use(shed({ maxInFlight: 500, maxEventLoopDelay: '200ms', tenant: (req) => req.get('x-tenant') }));
 */
export function shed(options: ShedOptions<Request>): ShedMiddleware {
  return controls.shed(options) as ShedMiddleware;
}

/**
 * Paces response bodies with a token bucket on bytes per key (all of a client's responses
 * share it); refuses nothing.
 * @example app.use('/downloads', limitRate({ rate: '2MB/s', burst: '16MB' }));
 */
export function limitRate(options: LimitRateOptions): LimitRateMiddleware {
  return controls.limitRate(options) as LimitRateMiddleware;
}
