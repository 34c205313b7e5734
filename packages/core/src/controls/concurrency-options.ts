/**
 * The concurrency limit's options: validated and normalised once at construction into
 * the settings the limit, its slots and its queue read.
 */
import { guardAppFn } from '../app-errors.js';
import type { Duration } from '../duration.js';
import { configError } from '../errors.js';
import { ip } from '../keys.js';
import { hashedKey } from '../limiter.js';
import type { KeyFn } from '../rules.js';
import { boundedDuration, checkOptions, MAX_TIMER_MS, optionalFn, wholeNumber } from './options.js';
import { MemorySlotStore, type SlotStore } from './slot-store.js';
import { systemTimers, type Timers } from './timers.js';

export interface ConcurrencyOptions<R = unknown> {
  /**
   * Most requests in flight per key (refusal: 429).
   * @example 3
   */
  max?: number;
  /**
   * Most requests in flight in total, across keys (refusal: 503). With a shared store
   * (Redis) this is across every instance.
   * @example 100
   */
  global?: number;
  /**
   * Requests that may wait for a slot, per key for the per-key limit and in total for
   * the global one. 0 refuses at once.
   * @default 0
   */
  queue?: number;
  /**
   * The longest a request waits in the queue before it is refused.
   * @default '10s'
   */
  queueTimeout?: Duration;
  /**
   * What to count under.
   * @default ip()
   */
  key?: KeyFn<R>;
  /**
   * Requests for which this returns true take no slot.
   * @example (req) => req.url === '/health'
   */
  skip?: (req: R) => boolean | Promise<boolean>;
  /**
   * The policy name in headers; the global limit is `<name>-global`.
   * @default 'concurrency'
   */
  name?: string;
  /**
   * Where slots are held.
   * @default new MemorySlotStore()
   */
  store?: SlotStore;
  /**
   * Lease length for stores that lease (Redis): a slot whose holder stops renewing it
   * (a crashed instance) frees itself this long after the last renewal. Held slots are
   * renewed every third of it.
   * @default '30s'
   */
  lease?: Duration;
  /**
   * How often waiters retry when the store is shared by other instances.
   * @default '100ms'
   */
  pollInterval?: Duration;
  /**
   * `Retry-After` of a refusal: a slot frees up when some response ends, which no one
   * can predict.
   * @default '1s'
   */
  retryAfter?: Duration;
  /**
   * Namespace of the slot keys.
   * @default 'tg-cc'
   */
  prefix?: string;
  /** Timer source (tests pass `ManualTimers`). @default systemTimers */
  timers?: Timers;
  /** The key of a limit that names none (adapters pass their trusted-proxy aware `ip()`). */
  defaultKey?: KeyFn<R>;
}

/** The options of one limit, checked and with their defaults. */
export interface ConcurrencySettings<R> {
  /** Where option errors point (`concurrency.<option>`). */
  readonly path: string;
  readonly max: number | undefined;
  readonly global: number | undefined;
  readonly queue: number;
  readonly queueTimeoutMs: number;
  readonly leaseMs: number;
  readonly pollMs: number;
  readonly retryAfterMs: number;
  readonly skip: ((req: R) => unknown) | undefined;
  readonly keyFn: (req: R) => unknown;
  readonly name: string;
  /** The policy name of the global limit in headers. */
  readonly globalName: string;
  readonly store: SlotStore;
  /** The store was created here, so `close()` closes it. */
  readonly ownStore: boolean;
  readonly timers: Timers;
  /** The slot key every request takes under the global limit. */
  readonly globalSlot: string;
  /** The slot key of a client key under the per-key limit. */
  keySlot(key: string): string;
}

const KNOWN = [
  'max',
  'global',
  'queue',
  'queueTimeout',
  'key',
  'skip',
  'name',
  'store',
  'lease',
  'pollInterval',
  'retryAfter',
  'prefix',
  'timers',
  'defaultKey',
] as const;
const NAME_RE = /^[\x21\x23-\x5b\x5d-\x7e]{1,57}$/;
/** The global slot's last segment, `<prefix>:<name>:*`, kept as it was so instances of either version count together. */
const GLOBAL = '*';

/** Checks `options` (coded errors for anything wrong) and fills in the defaults. */
export function concurrencySettings<R>(options: ConcurrencyOptions<R>): ConcurrencySettings<R> {
  const path = 'concurrency';
  checkOptions(options, KNOWN, path);
  const o = options as ConcurrencyOptions<R>;
  const max = o.max === undefined ? undefined : wholeNumber(o.max, `${path}.max`, 1);
  const global = o.global === undefined ? undefined : wholeNumber(o.global, `${path}.global`, 1);
  if (max === undefined && global === undefined) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'max (per key), global (in total), or both',
      received: 'neither',
      fix: 'Pass e.g. { max: 3 } or { global: 100 }.',
    });
  }
  const queue = o.queue === undefined ? 0 : wholeNumber(o.queue, `${path}.queue`, 0);
  const queueTimeoutMs = o.queueTimeout === undefined ? 10_000 : boundedDuration(o.queueTimeout, `${path}.queueTimeout`, MAX_TIMER_MS);
  const leaseMs = o.lease === undefined ? 30_000 : boundedDuration(o.lease, `${path}.lease`, MAX_TIMER_MS);
  const pollMs = o.pollInterval === undefined ? 100 : boundedDuration(o.pollInterval, `${path}.pollInterval`, MAX_TIMER_MS);
  const retryAfterMs = o.retryAfter === undefined ? 1000 : boundedDuration(o.retryAfter, `${path}.retryAfter`, MAX_TIMER_MS);
  const rawSkip = optionalFn<(req: R) => unknown>(o.skip, `${path}.skip`, '(req) => boolean');
  const skip = rawSkip === undefined ? undefined : guardAppFn(rawSkip);
  const rawKey = optionalFn<KeyFn<R>>(o.key, `${path}.key`, '(req) => string | undefined');
  // The app's callbacks: what they throw or reject with is the app's error, never a store failure.
  const keyFn: (req: R) => unknown = rawKey !== undefined ? guardAppFn(rawKey) : (o.defaultKey ?? (ip() as KeyFn<R>));
  const name = o.name ?? 'concurrency';
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.name`,
      expected: 'a name of 1 to 57 visible ASCII characters without quotes or backslashes',
      received: JSON.stringify(name),
      fix: 'Use a short name such as "concurrency"; it appears in headers.',
    });
  }
  const prefix = o.prefix ?? 'tg-cc';
  const store = o.store ?? new MemorySlotStore();
  const ownStore = o.store === undefined;
  const timers = o.timers ?? systemTimers;
  const globalName = `${name}-global`;
  const globalSlot = `${prefix}:${encodeURIComponent(name)}:${GLOBAL}`;
  // A client whose key is `*` is stored hashed, as any key sanitizeKey does not keep: the
  // global slot's name is never a client's (see docs/decisions.md, "Key namespaces").
  const keySlot = (k: string) => `${prefix}:${encodeURIComponent(name)}:${k === GLOBAL ? hashedKey(k) : k}`;
  return {
    path,
    max,
    global,
    queue,
    queueTimeoutMs,
    leaseMs,
    pollMs,
    retryAfterMs,
    skip,
    keyFn,
    name,
    globalName,
    store,
    ownStore,
    timers,
    globalSlot,
    keySlot,
  };
}
