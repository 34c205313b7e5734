/**
 * `slowDown()` for Express 4 and 5: the slow-down throttle. Counting and the delay
 * come from core (`createThrottle`); this file only waits and writes headers.
 *
 * Each delayed request waits on its own timer (no queue, so completions may come out
 * of order). A client that disconnects while delayed has its timer cleared and never
 * reaches the handler. Every response the throttle saw carries its figures in the
 * rate-limit headers (policy `q` = delayAfter, `r` = arrivals left before delays start).
 */
import {
  compileHeaders,
  createThrottle,
  type HeadersOption,
  hold,
  publishControl,
  publishStoreError,
  splitClientAddress,
  type ThrottleOptions,
  type ThrottleResult,
  type Timers,
  throttleDecision,
} from '@tollgate/core';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { type ClientAddressOptions, writeFields } from './control-response.js';

declare global {
  namespace Express {
    interface Request {
      /** What the slow-down throttle decided for this request (hits and delay). */
      slowDown?: ThrottleResult;
    }
  }
}

export interface SlowDownOptions extends Omit<ThrottleOptions<Request>, 'defaultKey'>, ClientAddressOptions {
  /**
   * Rate-limit headers carrying the throttle's figures, as for `rateLimit`.
   * @default 'draft-10'
   */
  headers?: HeadersOption;
  /**
   * Where delays get their timers (tests pass `ManualTimers`).
   * @default systemTimers
   */
  timers?: Timers;
}

export type SlowDownMiddleware = RequestHandler & {
  /** Forgets the request key's arrivals. */
  reset(req: Request): Promise<void>;
  /** Closes the store if the throttle created it. */
  close(): Promise<void>;
};

/**
 * Delays requests from a key once it has sent more than `delayAfter` in `window`.
 * @example
 * app.use(slowDown({ window: '10s', delayAfter: 5, delay: 500 }));
 */
export function slowDown(options: SlowDownOptions): SlowDownMiddleware {
  const { headers, timers, ...rest } = (options ?? {}) as SlowDownOptions;
  const [core, defaultKey] = splitClientAddress<Request, typeof rest>(rest);
  const throttle = createThrottle<Request>({ ...core, defaultKey } as ThrottleOptions<Request>);
  const format = compileHeaders(headers);
  const clock = core.clock;

  function proceed(req: Request, res: Response, next: NextFunction, t: ThrottleResult | undefined): void {
    if (t === undefined) {
      next();
      return;
    }
    req.slowDown = t;
    const at = clock?.now() ?? Date.now();
    if (format !== undefined) writeFields(res, format([t.result], at));
    publishControl(req, throttle.name, () => throttleDecision(t, at));
    if (t.delayMs === 0) {
      next();
      return;
    }
    hold(res, t.delayMs, timers).then((stillThere) => {
      if (stillThere) next();
    });
  }

  const middleware = function slowDown(req: Request, res: Response, next: NextFunction): void {
    throttle.hit(req).then(
      (t) => proceed(req, res, next, t),
      (err) => {
        // A throttle whose store fails lets requests through undelayed: it slows, it never blocks.
        publishStoreError(err, req, throttle.name, 'allow');
        next();
      },
    );
  } as SlowDownMiddleware;
  middleware.reset = (req) => throttle.reset(req);
  middleware.close = () => throttle.close();
  return middleware;
}
