/**
 * Errors of @tollgate/redis (SPEC 12). The package uses codes from the core catalogue
 * (`TG_INVALID_OPTION`, `TG_UNKNOWN_OPTION`, `TG_STORE_CLOSED`, `TG_STORE_TIMEOUT`,
 * `TG_STORE_ERROR`, documented in docs/errors.md); this module only builds them with
 * the expected / received / fix message shape.
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
