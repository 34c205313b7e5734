/**
 * The `lease` option of `RedisStore`: its validation and defaults, and the check of its
 * `ttl` against each rule's window (made once per rule, the first time it reaches the store:
 * the store is given no rules at construction).
 */
import { type Duration, parseDuration, type RuleSpec, type TollgateError, unknownOptionFix } from '@tollgate/core';
import { optionError } from '../errors.js';

export interface LeaseOptions {
  /**
   * The most units of a (rule, key) one lease takes. Smaller as the key nears its limit:
   * at most a share of what is left (`left / (instances + 1)`), down to the request's own cost.
   * @default 100
   */
  max?: number;
  /**
   * How long leased units may be used: they are counted in Redis when leased, so an
   * admission is counted at most `ttl` before it happens. At most a tenth of every rule's
   * window.
   * @default '1s'
   * @example lease: { max: 50, ttl: '200ms' }
   */
  ttl?: Duration;
  /**
   * The most keys this instance keeps lease entries for (each entry records a key's recent
   * demand or holds its lease, for about `ttl`): past it, keys not already held decide
   * exactly, so a flood of distinct keys cannot grow the process's memory without bound.
   * @default 100000
   * @example lease: { max: 100, ttl: '1s', maxKeys: 20_000 }
   */
  maxKeys?: number;
}

/** The lease settings in force. */
export interface LeaseSettings {
  readonly max: number;
  readonly ttlMs: number;
  /** A lease takes at most `left / share` units: `instances + 1`. */
  readonly share: number;
  /** The most keys with an entry in the lease table. */
  readonly maxKeys: number;
}

/** A rule's window must be at least this many times `ttl`. */
export const TTL_WINDOW_RATIO = 10;

const LEASE_KEYS = ['max', 'ttl', 'maxKeys'];

export function leaseSettings(value: unknown, instances: number): LeaseSettings {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw optionError('RedisStore.lease', 'an object { max?, ttl?, maxKeys? }', value, "Pass e.g. { max: 100, ttl: '1s' }, or omit it.");
  }
  for (const k of Object.keys(value)) {
    if (!LEASE_KEYS.includes(k))
      throw optionError(`RedisStore.lease.${k}`, LEASE_KEYS.join(', '), k, unknownOptionFix(k, LEASE_KEYS), 'TG_UNKNOWN_OPTION');
  }
  const o = value as LeaseOptions;
  if (o.max !== undefined && !(Number.isSafeInteger(o.max) && o.max >= 1)) {
    throw optionError('RedisStore.lease.max', 'a whole number of units >= 1', o.max, 'Use e.g. 100; omit it for the default.');
  }
  if (o.maxKeys !== undefined && !(Number.isSafeInteger(o.maxKeys) && o.maxKeys >= 1)) {
    throw optionError('RedisStore.lease.maxKeys', 'a whole number of keys >= 1', o.maxKeys, 'Use e.g. 100000; omit it for the default.');
  }
  const ttlMs = o.ttl === undefined ? 1000 : parseDuration(o.ttl, 'RedisStore.lease.ttl');
  return { max: o.max ?? 100, ttlMs, share: instances + 1, maxKeys: o.maxKeys ?? 100_000 };
}

/** The configuration error of a `ttl` not well below a rule's window, or undefined. */
export function ttlProblem(rule: RuleSpec, ttlMs: number): TollgateError | undefined {
  if (ttlMs * TTL_WINDOW_RATIO <= rule.windowMs) return undefined;
  return optionError(
    'RedisStore.lease.ttl',
    `at most a tenth of every rule's window (rule "${rule.name}" counts over ${rule.windowMs} ms, so at most ${Math.floor(rule.windowMs / TTL_WINDOW_RATIO)} ms)`,
    ttlMs,
    `Shorten the lease's ttl to ${Math.floor(rule.windowMs / TTL_WINDOW_RATIO)} ms or less, or give this rule a longer window.`,
  );
}
