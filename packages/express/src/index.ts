/**
 * @tollgate/express — Express 4 and 5 middleware.
 *
 * `rateLimit` and its route-level extension; the key extractors and the types users
 * write rules with are re-exported so an app needs one import.
 *
 * @module @tollgate/express
 */
export {
  constant,
  type Decision,
  type HeaderMode,
  type HeadersOption,
  header,
  ip,
  ManualClock,
  MemoryStore,
  type Rule,
  type RuleResult,
  type Store,
  type TrustProxy,
  tenant,
  user,
} from '@tollgate/core';
export { type ConcurrencyMiddleware, type ConcurrencyMiddlewareOptions, concurrency } from './concurrency.js';
export type { RateLimitMiddleware, RateLimitOptions, RouteOptions, StoreErrorPolicy } from './options.js';
export { rateLimit } from './rate-limit.js';
export { type ShedMiddleware, shed } from './shed.js';
export { type SlowDownMiddleware, type SlowDownOptions, slowDown } from './slow-down.js';
