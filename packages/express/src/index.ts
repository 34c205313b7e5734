/**
 * @tollgate/express — Express 4 and 5 middleware.
 *
 * `rateLimit` and its route-level extension, and the controls; the key extractors and
 * the types users write rules with are re-exported so an app needs one import.
 */
export * from '@tollgate/core/essentials';
export {
  type ClientAddressOptions,
  type ConcurrencyMiddleware,
  type ConcurrencyMiddlewareOptions,
  concurrency,
  type LimitRateMiddleware,
  type LimitRateOptions,
  limitRate,
  type ShedMiddleware,
  type SlowDownMiddleware,
  type SlowDownOptions,
  shed,
  slowDown,
} from './controls.js';
export type { RateLimitMiddleware, RateLimitOptions, RouteOptions, StoreErrorPolicy } from './options.js';
export { rateLimit } from './rate-limit.js';
