/**
 * Options of `rateLimit()` for Koa: the shared limiter options typed for Koa's one
 * context object (`ctx` is both request and response), validated once at construction
 * by core (`normalizeLimiterOptions`) with Koa's wording.
 */
import type { Decision } from '@tollgate/core';
import {
  type AdapterWording,
  type LimiterMethods,
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  type RateLimitSource,
  type RouteOptionsOf,
} from '@tollgate/core/http';
import type { Context, Middleware, Next } from 'koa';

/**
 * What to do when the store fails to decide (Redis down, timeout): `'allow'`, `'deny'`
 * (503), `'error'` (thrown to Koa's error handling), or a function that answers through
 * `ctx` or lets the request on with `return next()`.
 */
export type StoreErrorPolicy = 'allow' | 'deny' | 'error' | ((error: unknown, ctx: Context, next: Next) => unknown);

/** The callbacks whose Koa signatures take the context once. */
type OwnSignatures = 'skip' | 'onRejected' | 'onStoreError';

export interface RateLimitOptions extends Omit<LimiterOptionsOf<Context, Context, Next>, OwnSignatures> {
  /**
   * Requests for which this returns true bypass every rule (health checks).
   * @example skip: (ctx) => ctx.path === '/healthz'
   */
  skip?: (ctx: Context) => boolean | Promise<boolean>;
  /** Called for every refused request (before the response is sent), e.g. for logging. */
  onRejected?: (ctx: Context, decision: Decision) => void;
  /** @default 'allow' */
  onStoreError?: StoreErrorPolicy;
  /**
   * Answers refused requests yourself, as a middleware with the decision: status,
   * `Retry-After` and the rate-limit headers are already set; set `ctx.body` (or
   * `return next()` to let the request on).
   * @example handler: (ctx, next, decision) => { ctx.body = { retryInMs: decision.retryAfterMs }; }
   */
  handler?: (ctx: Context, next: Next, decision: Decision) => unknown;
}

/** Route-level rules of an app-level limiter (`limiter.route({ rules, mode })`). */
export type RouteOptions = RouteOptionsOf<Context>;

const WORDING: AdapterWording = {
  path: 'rateLimit',
  names: ['ctx', 'next'],
  notObject: "Call rateLimit({ rules: [{ name: 'ip', rate: '100/min' }] }).",
};

/** Validates `rateLimit()` options; rules themselves are validated by the core limiter. */
export function normalise(options: RateLimitOptions): RateLimitSource<Context, RateLimitOptions> {
  return normalizeLimiterOptions<Context, RateLimitOptions>(options, WORDING);
}

/** The middleware `rateLimit()` returns, with the operations by key and its route-level extension. */
export interface RateLimitMiddleware extends Middleware, LimiterMethods<Context> {
  /**
   * A route-level middleware (for `@koa/router`) adding `rules` to this limiter's (one
   * all-or-nothing decision: a route-level refusal gives back what the app-level check
   * consumed), or with `mode: 'replace'` standing instead of them.
   * @example router.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }), login)
   */
  route(options: RouteOptions): Middleware;
}
