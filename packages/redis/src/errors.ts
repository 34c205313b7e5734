/**
 * Errors of @tollgate/redis. The package uses codes from the core catalogue
 * (`TG_INVALID_OPTION`, `TG_UNKNOWN_OPTION`, `TG_STORE_CLOSED`, `TG_STORE_TIMEOUT`,
 * `TG_STORE_ERROR`, documented in docs/errors.md); this module builds them with the
 * expected / received / fix message shape, and holds the codes of the package's own
 * process warnings (`REDIS_WARNINGS`, also documented there).
 */
import { configError, describeValue, TollgateError } from '@tollgate/core';

/** A bad RedisStore / RedisSlotStore option, built by core's `configError` (same message shape). */
export function optionError(
  path: string,
  expected: string,
  value: unknown,
  fix: string,
  code: 'TG_INVALID_OPTION' | 'TG_UNKNOWN_OPTION' = 'TG_INVALID_OPTION',
): TollgateError {
  const received = code === 'TG_UNKNOWN_OPTION' ? JSON.stringify(value) : describeValue(value);
  return configError(code, { path, expected, received, fix });
}

export function closedError(): TollgateError {
  return new TollgateError('TG_STORE_CLOSED', 'RedisStore: used after close(). Create a new store, or stop calling this one.');
}

export function timeoutError(ms: number): TollgateError {
  return new TollgateError('TG_STORE_TIMEOUT', `RedisStore: Redis did not answer within timeoutMs (${ms} ms).`);
}

/** Codes of the process warnings `RedisStore` emits (checks.ts, redis-store.ts), and their one-line meaning. */
export const REDIS_WARNINGS = {
  TOLLGATE_REDIS_EVICTION_POLICY: 'Redis runs with a maxmemory-policy other than noeviction, so it may evict rate-limit counters.',
  TOLLGATE_REDIS_CLOCK_SKEW: 'A RedisStore clock differs from Redis TIME by more than a second at connect.',
  TOLLGATE_REDIS_LISTENER_FAILED: "A RedisStore 'error' or 'breaker' listener threw or rejected; the store caught it and went on.",
} as const;

export type RedisWarningCode = keyof typeof REDIS_WARNINGS;

/** A `client` option that is neither an ioredis / iovalkey nor a node-redis client. */
export function clientError(store: 'RedisStore' | 'RedisSlotStore', value: unknown): TollgateError {
  return optionError(
    `${store}.client`,
    'an ioredis or iovalkey Redis or Cluster, or a node-redis client, cluster or Sentinel client',
    value,
    `Pass the client you built: new ${store}({ client: new Redis(url) }) or { client: await createClient({ url }).connect() }.`,
  );
}
