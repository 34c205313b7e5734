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
import { publishStoreError } from '../diagnostics.js';
import { createLimiter } from '../limiter.js';
import type { KeyFn } from '../rules.js';
import { type ByteRate, parseByteRate, parseSize, type Size } from '../sizes.js';
import type { RuleResult, Store, StoreOp } from '../types.js';
import { checkOptions, optionalFn } from './options.js';
import { systemTimers, type TimerHandle, type Timers } from './timers.js';

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

/** One response's access to its key's bucket. */
export interface ByteGrant {
  /**
   * Asks for up to `want` bytes; `grant(n)` is called once with `1 <= n <= want` when they
   * may leave (synchronously if the pool already holds them). One request at a time.
   */
  take(want: number, grant: (n: number) => void): void;
  /**
   * The response is over: stop waiting, hand back `unused` granted bytes that never left,
   * and return the key's unused bytes to the store when no other response of it is open here.
   */
  close(unused?: number): void;
}

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

interface Waiter {
  want: number;
  grant: (n: number) => void;
}

/** A key's local state on this instance: alive while some response of the key is open. */
interface KeyPool {
  ops: StoreOp[];
  /** Bytes counted in the store and not yet handed out. */
  pool: number;
  /** When the latest chunk was counted (store time), for the refund. */
  at: number;
  waiters: Waiter[];
  users: number;
  /** Every response of the key has ended: a chunk still on its way goes back at once. */
  dead: boolean;
  /** A store call or a wait is under way. */
  busy: boolean;
  timer: TimerHandle | undefined;
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
  const keys = new Map<string, KeyPool>();
  let responses = 0;
  let closed = false;

  const now = (): number | undefined => o.clock?.now();

  function pump(k: KeyPool): void {
    while (k.waiters.length > 0 && k.pool > 0) {
      const w = k.waiters.shift() as Waiter;
      const n = Math.min(w.want, k.pool);
      k.pool -= n;
      w.grant(n);
    }
    if (k.waiters.length === 0 || k.busy) return;
    if (closed) {
      // The control is closed: what still waits goes on unpaced.
      for (const w of k.waiters.splice(0)) w.grant(w.want);
      return;
    }
    let wanted = 0;
    for (const w of k.waiters) wanted += w.want;
    fetchChunk(k, Math.min(chunk, wanted), true);
  }

  /** Takes `cost` bytes; refused, takes what the bucket holds if `partial` allows, or waits until the chunk fits. */
  function fetchChunk(k: KeyPool, cost: number, partial: boolean): void {
    k.busy = true;
    const ops = k.ops.map((op) => ({ ...op, cost }));
    const done = (allowed: boolean, at: number, retryAfterMs: number, remaining: number) => {
      if (k.dead) {
        if (allowed) giveBack(k.ops, cost, at);
        return;
      }
      if (allowed) {
        k.busy = false;
        k.pool += cost;
        k.at = at;
        pump(k);
        return;
      }
      // Half a chunk or more is there (the tail of a burst): take it rather than wait; less, wait for the chunk.
      if (partial && remaining * 2 >= cost && remaining < cost) {
        fetchChunk(k, remaining, false);
        return;
      }
      // Exactly when the chunk fits; a refusal with no wait (cannot happen: cost <= burst) retries after 1 ms.
      k.timer = timers.setTimeout(
        () => {
          k.timer = undefined;
          k.busy = false;
          pump(k);
        },
        Math.max(1, retryAfterMs),
      );
    };
    const failed = (err: unknown) => {
      k.busy = false;
      publishStoreError(err, undefined, name, 'allow');
      if (k.dead) return;
      // Shape, never block: the waiting writes go on unpaced.
      for (const w of k.waiters.splice(0)) w.grant(w.want);
    };
    const t = now();
    if (store.consumeSync !== undefined) {
      let d: ReturnType<NonNullable<Store['consumeSync']>>;
      try {
        d = store.consumeSync(ops, t);
      } catch (err) {
        failed(err);
        return;
      }
      done(d.allowed || d.degraded !== undefined, d.now, d.outcomes[0]?.retryAfterMs ?? 1, d.outcomes[0]?.remaining ?? 0);
      return;
    }
    store
      .consume(ops, t)
      .then(
        (d) => done(d.allowed || d.degraded !== undefined, d.now, d.outcomes[0]?.retryAfterMs ?? 1, d.outcomes[0]?.remaining ?? 0),
        failed,
      );
  }

  function release(id: string, k: KeyPool): void {
    k.users -= 1;
    responses -= 1;
    if (k.users > 0) {
      pump(k);
      return;
    }
    keys.delete(id);
    k.dead = true;
    if (k.timer !== undefined) timers.clearTimeout(k.timer);
    k.timer = undefined;
    const unused = k.pool;
    k.pool = 0;
    if (unused > 0) giveBack(k.ops, unused, k.at);
  }

  /** Returns bytes counted at `at` and never sent. */
  function giveBack(ops: StoreOp[], bytes: number, at: number): void {
    if (closed && o.store === undefined) return;
    store
      .refund(
        ops.map((op) => ({ ...op, cost: bytes })),
        at,
        now(),
      )
      .catch((err: unknown) => publishStoreError(err, undefined, name, 'allow'));
  }

  return {
    name,
    rate,
    burst,
    after,
    chunk,
    store,
    get active() {
      return { responses, keys: keys.size };
    },
    async open(req) {
      if (await skipOf(skip, path, req)) return undefined;
      const ops = await limiter.resolveAsync(req, chunk);
      const first = ops[0];
      if (first === undefined) return undefined;
      const id = first.key;
      let k = keys.get(id);
      if (k === undefined) {
        k = { ops, pool: 0, at: 0, waiters: [], users: 0, dead: false, busy: false, timer: undefined };
        keys.set(id, k);
      }
      k.users += 1;
      responses += 1;
      const pool = k;
      let over = false;
      let mine: Waiter | undefined;
      return {
        take(want, grant) {
          if (over || !(want > 0)) {
            grant(want > 0 ? want : 1);
            return;
          }
          const w: Waiter = {
            want,
            grant: (n) => {
              mine = undefined;
              grant(n);
            },
          };
          mine = w;
          pool.waiters.push(w);
          pump(pool);
        },
        close(unused = 0) {
          if (over) return;
          over = true;
          if (unused > 0) pool.pool += unused;
          if (mine !== undefined) {
            const i = pool.waiters.indexOf(mine);
            if (i >= 0) pool.waiters.splice(i, 1);
            mine = undefined;
          }
          release(id, pool);
        },
      };
    },
    async figures(req) {
      const d = await limiter.peek(req, { cost: 1 });
      const r = d.rules[0];
      // The peek asks for one byte and reports what would be left: the bucket holds one more.
      return r === undefined ? undefined : { ...r, remaining: r.allowed ? r.remaining + 1 : r.remaining };
    },
    async close() {
      closed = true;
      for (const k of keys.values()) {
        if (k.timer !== undefined) timers.clearTimeout(k.timer);
        k.timer = undefined;
        k.busy = false;
        pump(k);
      }
      if (o.store === undefined) await store.close();
    },
  };
}
