/**
 * `node:diagnostics_channel` channels of the Redis store. Names are stable;
 * message shapes may only grow. Publishing checks `hasSubscribers` first.
 *
 * - `tollgate:redis:error`   a Redis call failed or timed out:
 *   `{ store, error, operation, policy, breaker }` where `policy` is what answered
 *   instead (`'allow' | 'deny' | 'local'`, or `'none'` for refund/reset).
 * - `tollgate:redis:breaker` the breaker changed state: `{ store, from, to, failures }`.
 * - `tollgate:redis:warning` a connect-time check found a setting that can let a limit be
 *   exceeded: `{ store, code, message, policy?, skewMs? }` (see checks.ts).
 */
import diagnosticsChannel from 'node:diagnostics_channel';

export const REDIS_CHANNEL_NAMES = {
  error: 'tollgate:redis:error',
  breaker: 'tollgate:redis:breaker',
  warning: 'tollgate:redis:warning',
} as const;

export const redisChannels = {
  error: diagnosticsChannel.channel(REDIS_CHANNEL_NAMES.error),
  breaker: diagnosticsChannel.channel(REDIS_CHANNEL_NAMES.breaker),
  warning: diagnosticsChannel.channel(REDIS_CHANNEL_NAMES.warning),
} as const;
