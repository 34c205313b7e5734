/**
 * @tollgate/koa — Koa middleware.
 *
 * `rateLimit` and its route-level extension for `@koa/router`, and the controls; the key
 * extractors and the types users write rules with are re-exported so an app needs one
 * import. The decision is at `ctx.state.rateLimit`, the throttle's figures at
 * `ctx.state.slowDown` (both typed on Koa's `DefaultState`).
 */
export * from '@tollgate/core/essentials';
export * from './controls.js';
export type { RateLimitMiddleware, RateLimitOptions, RouteOptions, StoreErrorPolicy } from './options.js';
export { rateLimit } from './rate-limit.js';
