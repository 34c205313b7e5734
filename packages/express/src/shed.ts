/**
 * `shed()` for Express 4 and 5: load shedding. The decision is core's
 * (`createShedder`), synchronous and made before anything else, so put this middleware
 * first. An admitted request counts as in flight until its response finishes or its
 * connection closes.
 */
import { createShedder, isGone, onceDone, publishControl, type Shedder, type ShedOptions, shedDecision, shedRefusal } from '@tollgate/core';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendRefusal } from './control-response.js';

export type ShedMiddleware = RequestHandler & {
  /** The core shedder (for `inFlight` and `pressure()`). */
  readonly shedder: Shedder<Request>;
  /** Stops the event-loop monitor. */
  close(): void;
};

/**
 * Answers 503 with `Retry-After` while the server is overloaded.
 * @example
 * app.use(shed({ maxInFlight: 500, maxEventLoopDelay: '200ms', tenant: (req) => req.get('x-tenant') }));
 */
export function shed(options: ShedOptions<Request>): ShedMiddleware {
  const shedder = createShedder<Request>(options);
  const middleware = function shed(req: Request, res: Response, next: NextFunction): void {
    const o = shedder.check(req);
    if (o === undefined) {
      next();
      return;
    }
    if (o.shed) {
      publishControl(req, 'shed', () => shedDecision(o));
      sendRefusal(res, shedRefusal(o));
      return;
    }
    onceDone(res, o.release);
    if (!isGone(res)) next();
  } as ShedMiddleware;
  Object.defineProperty(middleware, 'shedder', { value: shedder });
  middleware.close = () => shedder.close();
  return middleware;
}
