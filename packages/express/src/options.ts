/**
 * Options of `rateLimit()` (SPEC 9, 13): the shared limiter options typed for Express,
 * validated once at construction (`normalizeLimiterOptions`), plus express-rate-limit's
 * `passOnStoreError` spelling.
 */
import { configError, type Decision, describeValue, type Rule } from '@tollgate/core';
import {
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  type RateLimitSource,
  type RouteMode,
  type StoreErrorPolicyOf,
} from '@tollgate/core/http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** What to do when the store fails to decide (Redis down, timeout). */
export type StoreErrorPolicy = StoreErrorPolicyOf<Request, Response, NextFunction>;

export interface RateLimitOptions extends LimiterOptionsOf<Request, Response, NextFunction> {
  /**
   * Answers refused requests yourself. Status, `Retry-After` and the rate-limit headers
   * are already set when it runs; call `res.send(...)` (or `next()` to let the request on).
   */
  handler?: (req: Request, res: Response, next: NextFunction, decision: Decision) => unknown;
  /** express-rate-limit's spelling: `true` is `onStoreError: 'allow'`, `false` is `'error'`. */
  passOnStoreError?: boolean;
}

/** Route-level rules of an app-level limiter (`limiter.route({ rules, mode })`). */
export interface RouteOptions {
  rules: Rule<Request>[];
  /**
   * `'add'`: the route's rules join the app-level ones (both must admit). `'replace'`: the
   * route's rules stand alone (e.g. a bulk endpoint with a higher limit); declare the
   * route before `app.use(limiter)` so that the app-level rules never refuse it.
   * @default 'add'
   */
  mode?: RouteMode;
}

const ONLY_ONE = {
  path: 'rateLimit.passOnStoreError',
  expected: 'onStoreError or passOnStoreError, not both',
  received: 'both',
  fix: 'Keep onStoreError.',
};

/** Validates `rateLimit()` options; rules themselves are validated by the core limiter. */
export function normalise(options: RateLimitOptions): RateLimitSource<Request, RateLimitOptions> {
  let o = options;
  const pass = (o as Partial<RateLimitOptions> | null)?.passOnStoreError;
  if (pass !== undefined) {
    if (o.onStoreError !== undefined) throw configError('TG_INVALID_OPTION', ONLY_ONE);
    if (typeof pass !== 'boolean') {
      throw configError('TG_INVALID_OPTION', {
        ...ONLY_ONE,
        expected: 'true or false',
        received: describeValue(pass),
        fix: "Prefer onStoreError: 'allow' | 'deny' | 'error'.",
      });
    }
    // express-rate-limit's spelling, translated before the shared checks.
    const { passOnStoreError: _, ...rest } = o;
    o = { ...rest, onStoreError: pass ? 'allow' : 'error' };
  }
  return normalizeLimiterOptions<Request, RateLimitOptions>(o, {
    path: 'rateLimit',
    req: 'req',
    res: 'res',
    next: 'next',
    handler: '(req, res, next, decision)',
    timersFix: 'Pass new ManualTimers(clock) in tests, or leave it out.',
    fixes: {
      notObject: "Call rateLimit({ rules: [{ name: 'ip', rate: '100/min' }] }).",
      unknown: () => 'Remove the option or check its spelling (docs/migrating.md maps express-rate-limit options).',
    },
  });
}

/** Validates `limiter.route()` options. */
export function routeOptions(o: unknown): RouteOptions {
  const extra = typeof o === 'object' && o !== null ? Object.keys(o).find((k) => k !== 'rules' && k !== 'mode') : undefined;
  if (typeof o !== 'object' || o === null || extra !== undefined) {
    throw configError(extra === undefined ? 'TG_INVALID_OPTION' : 'TG_UNKNOWN_OPTION', {
      path: extra === undefined ? 'route' : `route.${extra}`,
      expected: extra === undefined ? 'an options object { rules, mode? }' : 'rules or mode',
      received: extra === undefined ? describeValue(o) : JSON.stringify(extra),
      fix: "Call limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }); other options come from the app-level limiter.",
    });
  }
  return o as RouteOptions;
}

/** The middleware `rateLimit()` returns, with its route-level extension. */
export interface RateLimitMiddleware extends RequestHandler {
  /**
   * A route-level middleware adding `rules` to this limiter's (one all-or-nothing
   * decision: a route-level refusal gives back what the app-level check consumed), or
   * with `mode: 'replace'` standing instead of them.
   * @example app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }), login)
   */
  route(options: RouteOptions): RequestHandler;
  /** Forgets the request's counters for every app-level rule (e.g. after a successful login). */
  reset(req: Request): Promise<void>;
  /** Decides the request against the app-level rules without consuming anything. */
  peek(req: Request): Promise<Decision>;
}
