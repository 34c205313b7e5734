/**
 * @tollgate/client — a polite fetch: honours Retry-After and RateLimit headers,
 * backs off with full jitter, retries only what is safe to repeat, and can pace itself
 * with any @tollgate/core rule.
 *
 * @module @tollgate/client
 */

export { backoffCeilingMs, type Jitter, retryWaitMs } from './backoff.js';
export { CLIENT_ERROR_CODES, type ClientErrorCode, TollgateClientError } from './errors.js';
export { createFetch } from './fetch.js';
export { parseHttpDate } from './http-date.js';
export type {
  CreateFetchOptions,
  GiveUpEvent,
  GiveUpReason,
  PaceRequest,
  RetryEvent,
  RetryReason,
  WaitEvent,
} from './options.js';
export { exhaustedWaitMs, type HeaderReader, parseRateLimit, type RateLimitReport, readXReset } from './ratelimit-headers.js';
export { isReplayableBody } from './request.js';
export { parseRetryAfter } from './retry-after.js';
export { realSleep, type Sleep } from './sleep.js';
