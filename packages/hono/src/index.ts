/**
 * @tollgate/hono — Hono 4 middleware on any runtime (Web `Request`/`Response`).
 *
 * `rateLimit` and its route-level extension, and the controls; the decision is at
 * `c.get('rateLimit')`. The client address comes from the runtime's `getConnInfo`, passed
 * as `connInfo`. The key extractors and the types users write rules with are re-exported
 * so an app needs one import.
 */
export * from '@tollgate/core/essentials';
export {
  type ConcurrencyMiddleware,
  type ConcurrencyMiddlewareOptions,
  concurrency,
  type LimitRateMiddleware,
  type LimitRateOptions,
  limitRate,
  type ShedMiddleware,
  type ShedMiddlewareOptions,
  type SlowDownEnv,
  type SlowDownMiddleware,
  type SlowDownOptions,
  type SlowDownVariables,
  shed,
  slowDown,
} from './controls.js';
export type { HonoNext } from './port.js';
export {
  type ConnInfoOption,
  type RateLimitEnv,
  type RateLimitMiddleware,
  type RateLimitOptions,
  type RateLimitVariables,
  rateLimit,
} from './rate-limit.js';
