/**
 * `RedisStore`'s options: their types, the events the store emits, and their validation
 * (each bad option is a coded error naming the option, see docs/errors.md).
 */
import { type Clock, unknownOptionFix } from '@tollgate/core';
import type { BreakerOptions, BreakerState } from './breaker.js';
import { portOf } from './client.js';
import { clientError, optionError } from './errors.js';
import type { StoreErrorPolicy } from './fallback.js';
import type { LeaseOptions } from './lease/options.js';
import type { RedisClientLike } from './script.js';

export interface RedisStoreOptions {
  /**
   * The client you built and connected: ioredis or iovalkey (`Redis`, Sentinel through
   * `new Redis({ sentinels, name })`, `Cluster`), or node-redis (`createClient`,
   * `createCluster`, `createSentinel`). Both are optional peer dependencies.
   */
  client: RedisClientLike;
  /**
   * Prepended to every Redis key (no braces).
   * @default ''
   * @example new RedisStore({ client, prefix: 'myapp:' })
   */
  prefix?: string;
  /**
   * Deadline of every Redis call in ms; past it the failure policy answers.
   * @default 100
   */
  timeoutMs?: number;
  /**
   * What decides when Redis cannot: let through, refuse (503), or a local in-memory
   * store of the same rules.
   * @default 'local'
   */
  onStoreError?: StoreErrorPolicy;
  /**
   * Expected number of instances: the `'local'` fallback divides every limit by it.
   * @default 1
   * @example new RedisStore({ client, instances: 4 }) // each instance keeps a quarter while Redis is down
   */
  instances?: number;
  /**
   * Time source when the limiter passes none: `'redis'` (the script's `TIME`) or a Clock.
   * A Clock is for tests: instances on Redis time and one on its own clock disagree about
   * every window. More than a second away from Redis `TIME` at connect, it gets a
   * `TOLLGATE_REDIS_CLOCK_SKEW` warning.
   * @default 'redis'
   */
  clock?: 'redis' | Clock;
  /**
   * Hash tag of a (rule, key), so that a stack shares one Cluster slot (one round trip).
   * Given the key as the rule's key function returned it (as text, before sanitising); the
   * tag returned is sanitised like a key.
   * @default the key itself: rules counting under the same key share a slot
   * @example hashTag: (_rule, key) => key.split(':')[0] // by tenant, for keys "tenant:user"
   */
  hashTag?: (ruleName: string, key: string) => string;
  /**
   * The local deny cache: a stack Redis rejected until T is rejected locally until T.
   * `false` turns it off; a number caps its entries.
   * @default true (10000 entries)
   */
  denyCache?: boolean | number;
  /**
   * Send the stacks requested in the same tick as one script run (standalone Redis only),
   * decided one after the other, each all-or-nothing.
   * @default true
   */
  batch?: boolean;
  /**
   * Least TTL, in ms, of a key written on supplied time (a `clock` here or on the limiter):
   * Redis expires keys on its own clock, which a supplied clock need not follow. An entry
   * past its expiry is read as absent whatever its TTL, so this only delays clean-up. On
   * Redis time TTLs are exact.
   * @default 1000
   */
  minTtlMs?: number;
  /**
   * Breaker settings: consecutive failures that open it, and the cool-down before a probe.
   * @default { failures: 3, cooldownMs: 1000 }
   */
  breaker?: BreakerOptions;
  /**
   * Leases: an instance takes up to `max` units of a (rule, key) from Redis in one atomic
   * call and decides locally from them for up to `ttl` (see docs/distributed.md, "Leases").
   * Lease sizes shrink as a key nears its limit, down to one request's cost.
   * @default off
   * @example new RedisStore({ client, lease: { max: 100, ttl: '1s' } })
   */
  lease?: LeaseOptions;
}

export interface StoreErrorEvent {
  error: unknown;
  operation: 'consume' | 'peek' | 'refund' | 'settle' | 'reset';
  /** What answered instead: the policy, or `'none'` for refund and reset. */
  policy: StoreErrorPolicy | 'none';
  breaker: BreakerState;
}

export interface BreakerEvent {
  from: BreakerState;
  to: BreakerState;
  failures: number;
}

const KNOWN = new Set([
  'client',
  'prefix',
  'timeoutMs',
  'onStoreError',
  'instances',
  'clock',
  'hashTag',
  'denyCache',
  'breaker',
  'minTtlMs',
  'batch',
  'lease',
]);
const POLICIES = new Set(['allow', 'deny', 'local']);

/** Throws the coded error of the first bad option of `o`. */
export function validate(o: RedisStoreOptions): void {
  if (typeof o !== 'object' || o === null)
    throw optionError('RedisStore', 'an options object { client, ... }', o, 'Pass { client: new Redis() }.');
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) throw optionError(`RedisStore.${k}`, [...KNOWN].join(', '), k, unknownOptionFix(k, KNOWN), 'TG_UNKNOWN_OPTION');
  }
  if (portOf(o.client) === undefined) throw clientError('RedisStore', o.client);
  if (o.prefix !== undefined && (typeof o.prefix !== 'string' || /[{}\s]/.test(o.prefix) || o.prefix.length > 64)) {
    throw optionError(
      'RedisStore.prefix',
      'up to 64 characters without braces or spaces',
      o.prefix,
      'Use a short namespace such as "myapp:".',
    );
  }
  if (o.timeoutMs !== undefined && !(typeof o.timeoutMs === 'number' && o.timeoutMs > 0 && o.timeoutMs <= 2_147_483_647)) {
    throw optionError(
      'RedisStore.timeoutMs',
      'a number of ms > 0',
      o.timeoutMs,
      'Use a deadline a little above your Redis p99 latency, e.g. 100.',
    );
  }
  if (o.onStoreError !== undefined && !POLICIES.has(o.onStoreError)) {
    throw optionError(
      'RedisStore.onStoreError',
      "'allow', 'deny' or 'local'",
      o.onStoreError,
      "Pick what answers while Redis is down; 'local' is the default.",
    );
  }
  if (o.instances !== undefined && !(Number.isSafeInteger(o.instances) && o.instances >= 1)) {
    throw optionError('RedisStore.instances', 'a whole number >= 1', o.instances, 'Set it to the number of instances sharing the limits.');
  }
  if (o.clock !== undefined && o.clock !== 'redis' && typeof (o.clock as Clock | null)?.now !== 'function') {
    throw optionError('RedisStore.clock', "'redis' or an object with now(): number", o.clock, 'Omit it to use Redis time.');
  }
  if (o.hashTag !== undefined && typeof o.hashTag !== 'function') {
    throw optionError(
      'RedisStore.hashTag',
      'a function (ruleName, key) => string',
      o.hashTag,
      'Return the part that should share a slot, e.g. the tenant.',
    );
  }
  if (o.batch !== undefined && typeof o.batch !== 'boolean') {
    throw optionError('RedisStore.batch', 'true or false', o.batch, 'Omit it to batch (the default).');
  }
  if (o.minTtlMs !== undefined && !(Number.isSafeInteger(o.minTtlMs) && o.minTtlMs >= 0)) {
    throw optionError('RedisStore.minTtlMs', 'a whole number of ms >= 0', o.minTtlMs, 'Omit it to keep the default (1000).');
  }
  const dc = o.denyCache;
  if (dc !== undefined && typeof dc !== 'boolean' && !(Number.isSafeInteger(dc) && (dc as number) > 0)) {
    throw optionError(
      'RedisStore.denyCache',
      'true, false or a positive number of entries',
      dc,
      'Omit it to keep the default (on, 10000 entries).',
    );
  }
  const b = o.breaker;
  if (b !== undefined) {
    if (typeof b !== 'object' || b === null)
      throw optionError('RedisStore.breaker', 'an object { failures?, cooldownMs? }', b, 'Omit it for the defaults.');
    for (const k of Object.keys(b)) {
      if (k !== 'failures' && k !== 'cooldownMs')
        throw optionError(
          `RedisStore.breaker.${k}`,
          'failures, cooldownMs',
          k,
          unknownOptionFix(k, ['failures', 'cooldownMs']),
          'TG_UNKNOWN_OPTION',
        );
    }
    if (b.failures !== undefined && !(Number.isSafeInteger(b.failures) && b.failures >= 1)) {
      throw optionError('RedisStore.breaker.failures', 'a whole number >= 1', b.failures, 'Use e.g. 3.');
    }
    if (b.cooldownMs !== undefined && !(typeof b.cooldownMs === 'number' && b.cooldownMs >= 0 && Number.isFinite(b.cooldownMs))) {
      throw optionError('RedisStore.breaker.cooldownMs', 'a number of ms >= 0', b.cooldownMs, 'Use e.g. 1000.');
    }
  }
}
