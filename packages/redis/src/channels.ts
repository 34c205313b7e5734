/**
 * `node:diagnostics_channel` channels of the Redis store (SPEC 6.5, 9). Names are stable;
 * message shapes may only grow. Publishing checks `hasSubscribers` first.
 *
 * - `tollgate:redis:error`   a Redis call failed or timed out:
 *   `{ store, error, operation, policy, breaker }` where `policy` is what answered
 *   instead (`'allow' | 'deny' | 'local'`, or `'none'` for refund/reset).
 * - `tollgate:redis:breaker` the breaker changed state: `{ store, from, to, failures }`.
 */
import diagnosticsChannel from 'node:diagnostics_channel';

export const REDIS_CHANNEL_NAMES = {
  error: 'tollgate:redis:error',
  breaker: 'tollgate:redis:breaker',
} as const;

export const redisChannels = {
  error: diagnosticsChannel.channel(REDIS_CHANNEL_NAMES.error),
  breaker: diagnosticsChannel.channel(REDIS_CHANNEL_NAMES.breaker),
} as const;
