/**
 * `rateLimit()` for Express 4 and 5: the Express port and the mounting
 * code. The request pipeline (skip, decide, headers, diagnostics, counting by outcome,
 * hold, refuse, store errors) is core's (`@tollgate/core/http`), so every adapter
 * answers alike. A route-level extension (`limiter.route`) adds its rules to the
 * app-level ones (or replaces them), decided as one all-or-nothing decision.
 */
import { createRateLimit, type HttpPort, limiterMethods, type RequestRateLimit, routeOptionsOf } from '@tollgate/core/http';
import { nodePort } from '@tollgate/core/node';
import type { NextFunction, Request, Response } from 'express';
import { normalise, type RateLimitMiddleware, type RateLimitOptions } from './options.js';

declare global {
  namespace Express {
    interface Request {
      /** The rate-limit decision: every tollgate limiter this request has met, combined, with `settle(actual)` for a cost known after the work (docs/reserve.md). */
      rateLimit?: RequestRateLimit;
    }
  }
}

/** Express' request and response are Node's, with the app's `trust proxy` setting. */
export const expressPort: HttpPort<Request, Response, NextFunction> = {
  ...(nodePort as unknown as HttpPort<Request, Response, NextFunction>),
  name: 'express',
  frameworkTrust: (req) => req.app?.get('trust proxy'),
};

/**
 * Rate-limits requests with a stack of rules.
 * @example
 * import { rateLimit, user } from '@tollgate/express';
 * const limiter = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], trustProxy: 'loopback' });
 * app.use(limiter);
 * app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] }), login);
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const o = normalise(options);
  const core = createRateLimit(expressPort, o);
  const handle = core.handle;
  const middleware = function rateLimit(req: Request, res: Response, next: NextFunction): void {
    handle(req, res, next);
  } as RateLimitMiddleware;
  middleware.route = function route(options) {
    const r = routeOptionsOf<Request>(options);
    const stage = core.route(r.rules, r.mode, 'route rules');
    return function rateLimitRoute(req: Request, res: Response, next: NextFunction): void {
      stage(req, res, next);
    };
  };
  Object.assign(middleware, limiterMethods(core));
  return middleware;
}
