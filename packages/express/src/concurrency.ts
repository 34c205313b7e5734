/**
 * `concurrency()` for Express 4 and 5: the concurrency limit. Slots, the
 * queue and leases are core's (`createConcurrency`); this file ties a slot to the
 * response: it is released exactly once, when the response finishes or the connection
 * closes (aborted requests, handlers that throw, streamed responses alike).
 */
import {
  acquireWhileConnected,
  type ConcurrencyLimit,
  type ConcurrencyOptions,
  type ConcurrencyOutcome,
  concurrencyDecision,
  concurrencyHeaderFields,
  concurrencyRefusal,
  createConcurrency,
  isGone,
  onceDone,
  publishControl,
  splitClientAddress,
} from '@tollgate/core';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { type ClientAddressOptions, sendRefusal, writeFields } from './control-response.js';

export interface ConcurrencyMiddlewareOptions extends Omit<ConcurrencyOptions<Request>, 'defaultKey'>, ClientAddressOptions {
  /**
   * Send draft-10 items with `qu="concurrent-requests"` (`RateLimit-Policy` and `RateLimit`).
   * @default true
   */
  headers?: boolean;
}

export type ConcurrencyMiddleware = RequestHandler & {
  /** The core limit (for `count`, `held`, `waiting`). */
  readonly limit: ConcurrencyLimit<Request>;
  /** Refuses waiters, stops timers, closes a store it created. */
  close(): Promise<void>;
};

/**
 * Limits the requests in flight per key (429) and/or in total (503).
 * @example
 * app.use('/reports', concurrency({ max: 2, global: 50, queue: 10, queueTimeout: '5s' }));
 */
export function concurrency(options: ConcurrencyMiddlewareOptions): ConcurrencyMiddleware {
  const { headers = true, ...rest } = (options ?? {}) as ConcurrencyMiddlewareOptions;
  const [core, defaultKey] = splitClientAddress<Request, typeof rest>(rest);
  const limit = createConcurrency<Request>({ ...core, defaultKey } as ConcurrencyOptions<Request>);

  function answer(req: Request, res: Response, next: NextFunction, o: ConcurrencyOutcome | undefined): void {
    if (o === undefined) {
      next();
      return;
    }
    if (!o.admitted && o.reason === 'aborted') return; // the client is gone: nothing to answer
    publishControl(req, limit.name, () => concurrencyDecision(o));
    if (!o.admitted) {
      if (headers) writeFields(res, concurrencyHeaderFields(o.figures));
      sendRefusal(res, concurrencyRefusal(o));
      return;
    }
    if (isGone(res)) {
      o.release();
      return;
    }
    onceDone(res, o.release);
    if (headers) writeFields(res, concurrencyHeaderFields(o.figures));
    next();
  }

  const middleware = function concurrency(req: Request, res: Response, next: NextFunction): void {
    acquireWhileConnected(limit, req, res, res, next, answer);
  } as ConcurrencyMiddleware;
  Object.defineProperty(middleware, 'limit', { value: limit });
  middleware.close = () => limit.close();
  return middleware;
}
