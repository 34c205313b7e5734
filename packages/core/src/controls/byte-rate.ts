/**
 * The byte-rate bucket behind `limitRate`, framework-agnostic.
 *
 * One token bucket per key counted in bytes (capacity `burst`, refill `rate` bytes per
 * second), kept in an ordinary `Store` as a `token-bucket` rule (limit = rate per 1000 ms,
 * burst = burst), so the memory store bounds its keys like every other key and a
 * `RedisStore` shares the bucket across instances without store code of its own.
 *
 * An instance takes bytes from the store in chunks (`chunk`: 50 ms of rate, between 256 B
 * and 64 KiB, never above `burst`): one atomic consume of weighted cost per chunk, never
 * one per write. The chunk goes to a local pool per key, which every open response of that
 * key on this instance draws from in arrival order, so concurrent responses of a key share
 * one bucket (four downloads get `rate` in total). A refused chunk waits exactly the
 * store's `retryAfterMs`. When the last open response of a key ends, what is left of the
 * pool goes back to the store (`refund`, which gives back at most what the bytes still
 * weigh). Bytes leave only after they were counted, so over any interval T a key receives
 * at most `burst + rate·T` bytes (plus what each response sends unpaced under `after`).
 *
 * A store that fails lets bytes through unpaced (a control shapes, it never takes the
 * site down); the failure is published on the diagnostics channel.
 */
import { guardAppFn, skipOf } from '../app-errors.js';
import type { Clock } from '../clock.js';
import { createLimiter } from '../limiter.js';
import type { KeyFn } from '../rules.js';
import { type ByteRate, parseByteRate, parseSize, type Size } from '../sizes.js';
import type { RuleResult, Store } from '../types.js';
import { type ByteGrant, BytePools } from './byte-pools.js';
import { checkOptions, optionalFn } from './options.js';
import { systemTimers, type Timers } from './timers.js';

export interface ByteRateOptions<R = unknown> {
  /**
   * Bytes per second a key may receive once its burst is spent.
   * @example '2MB/s'
   */
  rate: ByteRate;
  /**
   * The bucket's size: bytes a key may receive at once after a quiet spell.
   * @default one second of `rate`
   * @example '16MB'
   */
  burst?: Size;
  /**
   * Bytes of each response sent unpaced before pacing starts (nginx's `limit_rate_after`);
   * they are not counted in the bucket.
   * @default 0
   */
  after?: Size;
  /**
   * Whose bucket a response draws from.
   * @default ip()
   */
  key?: KeyFn<R>;
  /** Responses for which this returns true are not paced. */
  skip?: (req: R) => boolean | Promise<boolean>;
  /**
   * The bucket's name (store key namespace part, diagnostics).
   * @default 'limit-rate'
   */
  name?: string;
  /**
   * Where the buckets live (a `RedisStore` shares them across instances).
   * @default new MemoryStore()
   */
  store?: Store;
  /** Time source; when omitted the store's own clock decides (Redis: `TIME`). */
  clock?: Clock;
  /**
   * Namespace of the store keys.
   * @default 'tg-lr'
   */
  prefix?: string;
  /** Timer source for waits (tests pass `ManualTimers`). @default systemTimers */
  timers?: Timers;
  /** The key of a control that names none (adapters pass their trusted-proxy aware `ip()`). */
  defaultKey?: KeyFn<R>;
}

export type { ByteGrant };

export interface ByteRateLimit<R = unknown> {
  readonly name: string;
  /** Bytes per second. */
  readonly rate: number;
  /** Bucket size in bytes. */
  readonly burst: number;
  /** Bytes per response sent unpaced. */
  readonly after: number;
  /** Bytes taken from the store per call. */
  readonly chunk: number;
  readonly store: Store;
  /** A grant for one response, or `undefined` when skipped or the key is absent. */
  open(req: R): Promise<ByteGrant | undefined>;
  /**
   * The request key's bucket as a rule's figures, without taking anything (for headers):
   * `remaining` is the bytes it holds now.
   */
  figures(req: R): Promise<RuleResult | undefined>;
  /** Responses open on this instance, and the keys they draw from. */
  readonly active: { responses: number; keys: number };
  /** Closes the store if this control created it; open responses go on unpaced. */
  close(): Promise<void>;
}

const KNOWN = ['rate', 'burst', 'after', 'key', 'skip', 'name', 'store', 'clock', 'prefix', 'timers', 'defaultKey'] as const;

/** 50 ms of rate, within [256 B, 64 KiB], at most the burst. */
export function chunkFor(rate: number, burst: number): number {
  return Math.min(burst, Math.max(256, Math.min(64 * 1024, Math.floor(rate / 20))));
}

/**
 * Creates a byte-rate limit.
 * @example
 * const limit = createByteRate({ rate: '2MB/s', burst: '16MB' });
 * const g = await limit.open(req); // then g.take(bytes, (n) => write n bytes), g.close() at the end
 */
export function createByteRate<R = unknown>(options: ByteRateOptions<R>): ByteRateLimit<R> {
  const path = 'limitRate';
  checkOptions(options, KNOWN, path);
  const o = options as ByteRateOptions<R>;
  const rate = parseByteRate(o.rate, `${path}.rate`);
  const burst = o.burst === undefined ? rate : parseSize(o.burst, `${path}.burst`);
  const after = o.after === undefined ? 0 : parseSize(o.after, `${path}.after`, 0);
  const rawSkip = optionalFn<(req: R) => unknown>(o.skip, `${path}.skip`, '(req) => boolean');
  const skip = rawSkip === undefined ? undefined : guardAppFn(rawSkip);
  const timers = o.timers ?? systemTimers;
  const name = o.name ?? 'limit-rate';
  const chunk = chunkFor(rate, burst);
  const limiter = createLimiter<R>({
    rules: [
      {
        name,
        ...(o.key !== undefined ? { key: typeof o.key === 'function' ? guardAppFn(o.key) : o.key } : {}),
        limit: rate,
        window: 1000,
        algorithm: 'token-bucket',
        burst,
      },
    ],
    prefix: o.prefix ?? 'tg-lr',
    ...(o.store !== undefined ? { store: o.store } : {}),
    ...(o.clock !== undefined ? { clock: o.clock } : {}),
    ...(o.defaultKey !== undefined ? { defaultKey: o.defaultKey } : {}),
  });
  const store = limiter.store;
  const pools = new BytePools({
    store,
    timers,
    chunk,
    name,
    now: () => o.clock?.now(),
    // A store this control created is closed with it: nothing goes back to it after that.
    refundAfterClose: o.store !== undefined,
  });

  return {
    name,
    rate,
    burst,
    after,
    chunk,
    store,
    get active() {
      return pools.active;
    },
    async open(req) {
      if (await skipOf(skip, path, req)) return undefined;
      const ops = await limiter.resolveAsync(req, chunk);
      const first = ops[0];
      if (first === undefined) return undefined;
      return pools.join(first.key, ops);
    },
    async figures(req) {
      const d = await limiter.peek(req, { cost: 1 });
      const r = d.rules[0];
      // The peek asks for one byte and reports what would be left: the bucket holds one more.
      return r === undefined ? undefined : { ...r, remaining: r.allowed ? r.remaining + 1 : r.remaining };
    },
    async close() {
      pools.close();
      if (o.store === undefined) await store.close();
    },
  };
}
