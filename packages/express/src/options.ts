/**
 * Options of `rateLimit()`: the shared limiter options typed for Express,
 * validated once at construction (`normalizeLimiterOptions`), plus express-rate-limit's
 * `passOnStoreError` spelling.
 */
import { configError, type Decision, describeValue } from '@tollgate/core';
import {
  EXPRESS_RATE_LIMIT_OPTIONS,
  type LimiterMethods,
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  peerHint,
  RATE_LIMIT_WORDING,
  type RateLimitSource,
  type RouteOptionsOf,
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
export type RouteOptions = RouteOptionsOf<Request>;

// An express-rate-limit option names its replacement; any other unknown name points to the map.
const fromPeer = peerHint('express-rate-limit', EXPRESS_RATE_LIMIT_OPTIONS);
const hint = (name: string) =>
  fromPeer(name) ?? 'Remove the option or check its spelling (docs/migrating.md maps express-rate-limit options).';

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
    ...RATE_LIMIT_WORDING,
    hint,
  });
}

/** The middleware `rateLimit()` returns, with the operations by key and its route-level extension. */
export interface RateLimitMiddleware extends RequestHandler, LimiterMethods<Request> {
  /**
   * A route-level middleware adding `rules` to this limiter's (one all-or-nothing
   * decision: a route-level refusal gives back what the app-level check consumed), or
   * with `mode: 'replace'` standing instead of them.
   * @example app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }), login)
   */
  route(options: RouteOptions): RequestHandler;
}
