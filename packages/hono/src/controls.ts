/**
 * The controls beside the limiter for Hono 4: `slowDown`, `concurrency`, `shed` and
 * `limitRate` as middleware, over core's flows (`@tollgate/core/http`). A slot or an
 * in-flight count is released once the response's body has been sent, or when the runtime
 * reports the client gone (the request's abort signal, or the body's cancellation);
 * `limitRate` paces the response's body as a Web stream.
 */
import type { ConcurrencyLimit, Shedder, ShedOptions, ThrottleResult } from '@tollgate/core';
import {
  type ConcurrencyFlowOptions,
  controlMakers,
  type LimitRateCarried,
  type LimitRateFlowOptions,
  type SlowDownFlowOptions,
} from '@tollgate/core/http';
import type { Context, MiddlewareHandler } from 'hono';
import { honoPort } from './port.js';
import { type ConnInfoOption, checkConnInfo, middleware, type RateLimitEnv } from './rate-limit.js';

export type SlowDownOptions = SlowDownFlowOptions<Context> & ConnInfoOption;
export type ConcurrencyMiddlewareOptions = ConcurrencyFlowOptions<Context> & ConnInfoOption;
export type ShedMiddlewareOptions = ShedOptions<Context>;
export type LimitRateOptions = LimitRateFlowOptions<Context> & ConnInfoOption;

/** `c.get('slowDown')`: what the throttle decided for this request. */
export type SlowDownVariables = { slowDown: ThrottleResult | undefined };
export type SlowDownEnv = { Variables: SlowDownVariables };

declare module 'hono' {
  interface ContextVariableMap extends SlowDownVariables {}
}

export type SlowDownMiddleware = MiddlewareHandler<SlowDownEnv> & {
  /** Forgets the request key's arrivals. */
  reset(c: Context): Promise<void>;
  /** Closes the store if the throttle created it. */
  close(): Promise<void>;
};

export type ConcurrencyMiddleware = MiddlewareHandler<RateLimitEnv> & {
  /** The core limit (for `count`, `held`, `waiting`). */
  readonly limit: ConcurrencyLimit<Context>;
  /** Refuses waiters, stops timers, closes a store it created. */
  close(): Promise<void>;
};

export type ShedMiddleware = MiddlewareHandler<RateLimitEnv> & {
  /** The core shedder (for `inFlight` and `pressure()`). */
  readonly shedder: Shedder<Context>;
  /** Stops the event-loop monitor. */
  close(): void;
};

/** The byte-rate limit as middleware, with its core `limit` and `close()`. */
export type LimitRateMiddleware = MiddlewareHandler<RateLimitEnv> & LimitRateCarried<Context>;

/** The controls over the port of one `connInfo`, each as middleware carrying its `close` and core object. */
const makers = (connInfo: ConnInfoOption['connInfo'], path: string) =>
  controlMakers(honoPort(checkConnInfo(connInfo, path)), (_name, stage, carried) => Object.assign(middleware(stage), carried));

/**
 * Delays requests from a key once it has sent more than `delayAfter` in `window`.
 * @example app.use(slowDown({ window: '10s', delayAfter: 5, delay: 500, connInfo: getConnInfo }));
 */
export function slowDown(options: SlowDownOptions): SlowDownMiddleware {
  const { connInfo, ...rest } = options ?? ({} as SlowDownOptions);
  return makers(connInfo, 'slowDown').slowDown(rest) as unknown as SlowDownMiddleware;
}

/**
 * Limits the requests in flight per key (429) and/or in total (503).
 * @example app.use('/reports/*', concurrency({ max: 2, global: 50, connInfo: getConnInfo }));
 */
export function concurrency(options: ConcurrencyMiddlewareOptions): ConcurrencyMiddleware {
  const { connInfo, ...rest } = options ?? ({} as ConcurrencyMiddlewareOptions);
  return makers(connInfo, 'concurrency').concurrency(rest) as unknown as ConcurrencyMiddleware;
}

/**
 * Answers 503 with `Retry-After` while the server is overloaded; mount it first.
 * @example app.use(shed({ maxInFlight: 500 }));
 */
export function shed(options: ShedMiddlewareOptions): ShedMiddleware {
  return makers(undefined, 'shed').shed(options) as unknown as ShedMiddleware;
}

/**
 * Paces response bodies with a token bucket on bytes per key (all of a client's responses
 * share it); refuses nothing. A paced body leaves as a stream: a download states its
 * `Content-Length` itself.
 * @example app.use('/downloads/*', limitRate({ rate: '2MB/s', burst: '16MB', connInfo: getConnInfo }));
 */
export function limitRate(options: LimitRateOptions): LimitRateMiddleware {
  const { connInfo, ...rest } = options ?? ({} as LimitRateOptions);
  return makers(connInfo, 'limitRate').limitRate(rest) as unknown as LimitRateMiddleware;
}
