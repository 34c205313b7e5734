/**
 * @tollgate/express — Express 4 and 5 middleware.
 *
 * `rateLimit` and its route-level extension, and the controls; the key extractors and
 * the types users write rules with are re-exported so an app needs one import.
 */
export {
  constant,
  type Decision,
  type HeaderMode,
  type HeadersOption,
  header,
  ip,
  ipKey,
  type KeyState,
  ManualClock,
  MemoryStore,
  type Rule,
  type RuleResult,
  type Store,
  type TrustProxy,
  tenant,
  user,
} from '@tollgate/core';
export {
  type ClientAddressOptions,
  type ConcurrencyMiddleware,
  type ConcurrencyMiddlewareOptions,
  concurrency,
  type ShedMiddleware,
  type SlowDownMiddleware,
  type SlowDownOptions,
  shed,
  slowDown,
} from './controls.js';
export type { RateLimitMiddleware, RateLimitOptions, RouteOptions, StoreErrorPolicy } from './options.js';
export { rateLimit } from './rate-limit.js';
