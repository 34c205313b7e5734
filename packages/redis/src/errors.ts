/**
 * Errors of @tollgate/redis (SPEC 12). The package uses codes from the core catalogue
 * (`TG_INVALID_OPTION`, `TG_UNKNOWN_OPTION`, `TG_STORE_CLOSED`, `TG_STORE_TIMEOUT`,
 * `TG_STORE_ERROR`, documented in docs/errors.md); this module only builds them with
 * the expected / received / fix message shape.
 */
import { TollgateError } from '@tollgate/core';

export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : String(value);
  if (typeof value === 'function') return 'a function';
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}

export function optionError(
  path: string,
  expected: string,
  value: unknown,
  fix: string,
  code: 'TG_INVALID_OPTION' | 'TG_UNKNOWN_OPTION' = 'TG_INVALID_OPTION',
) {
  const received = code === 'TG_UNKNOWN_OPTION' ? JSON.stringify(value) : describeValue(value);
  return new TollgateError(code, `${path}: expected ${expected}, received ${received}. ${fix}`, { path, expected, received, fix });
}

export function closedError(): TollgateError {
  return new TollgateError('TG_STORE_CLOSED', 'RedisStore: used after close(). Create a new store, or stop calling this one.');
}

export function timeoutError(ms: number): TollgateError {
  return new TollgateError('TG_STORE_TIMEOUT', `RedisStore: Redis did not answer within timeoutMs (${ms} ms).`);
}
