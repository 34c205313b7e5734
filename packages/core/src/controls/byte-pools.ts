/**
 * The local side of `limitRate`'s byte buckets: a pool per key on this instance, fed by
 * chunks taken from the store (one consume of weighted cost per chunk) and drawn from in
 * arrival order by the key's open responses. A key's pool lives while one of its
 * responses is open; what is left when the last one ends goes back to the store (refund).
 * See `byte-rate.ts` for the bucket and its bound.
 */
import { publishStoreError } from '../diagnostics.js';
import type { Store, StoreOp } from '../types.js';
import type { TimerHandle, Timers } from './timers.js';

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

export interface BytePoolsOptions {
  store: Store;
  timers: Timers;
  /** Bytes taken per store call. */
  chunk: number;
  /** The control's name, for diagnostics. */
  name: string;
  /** The clock's reading, or undefined for the store's own time. */
  now: () => number | undefined;
  /** Whether refunds still go to the store once `close` was called. */
  refundAfterClose: boolean;
}

export class BytePools {
  readonly #o: BytePoolsOptions;
  readonly #keys = new Map<string, KeyPool>();
  #responses = 0;
  #closed = false;

  constructor(options: BytePoolsOptions) {
    this.#o = options;
  }

  /** Responses open on this instance, and the keys they draw from. */
  get active(): { responses: number; keys: number } {
    return { responses: this.#responses, keys: this.#keys.size };
  }

  /** A grant on the pool of key `id` (whose store ops are `ops`) for one response. */
  join(id: string, ops: StoreOp[]): ByteGrant {
    let k = this.#keys.get(id);
    if (k === undefined) {
      k = { ops, pool: 0, at: 0, waiters: [], users: 0, dead: false, busy: false, timer: undefined };
      this.#keys.set(id, k);
    }
    k.users += 1;
    this.#responses += 1;
    const pool = k;
    let over = false;
    let mine: Waiter | undefined;
    return {
      take: (want, grant) => {
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
        this.#pump(pool);
      },
      close: (unused = 0) => {
        if (over) return;
        over = true;
        if (unused > 0) pool.pool += unused;
        if (mine !== undefined) {
          const i = pool.waiters.indexOf(mine);
          if (i >= 0) pool.waiters.splice(i, 1);
          mine = undefined;
        }
        this.#release(id, pool);
      },
    };
  }

  /** Stops every wait; what still waits, and every later take, goes on unpaced. */
  close(): void {
    this.#closed = true;
    for (const k of this.#keys.values()) {
      if (k.timer !== undefined) this.#o.timers.clearTimeout(k.timer);
      k.timer = undefined;
      k.busy = false;
      this.#pump(k);
    }
  }

  #pump(k: KeyPool): void {
    while (k.waiters.length > 0 && k.pool > 0) {
      const w = k.waiters.shift() as Waiter;
      const n = Math.min(w.want, k.pool);
      k.pool -= n;
      w.grant(n);
    }
    if (k.waiters.length === 0 || k.busy) return;
    if (this.#closed) {
      // The control is closed: what still waits goes on unpaced.
      for (const w of k.waiters.splice(0)) w.grant(w.want);
      return;
    }
    let wanted = 0;
    for (const w of k.waiters) wanted += w.want;
    this.#fetch(k, Math.min(this.#o.chunk, wanted), true);
  }

  /** Takes `cost` bytes; refused, takes what the bucket holds if `partial` allows, or waits until the chunk fits. */
  #fetch(k: KeyPool, cost: number, partial: boolean): void {
    const { store, timers, name } = this.#o;
    k.busy = true;
    const ops = k.ops.map((op) => ({ ...op, cost }));
    const done = (allowed: boolean, at: number, retryAfterMs: number, remaining: number) => {
      if (k.dead) {
        if (allowed) this.#giveBack(k.ops, cost, at);
        return;
      }
      if (allowed) {
        k.busy = false;
        k.pool += cost;
        k.at = at;
        this.#pump(k);
        return;
      }
      // Half a chunk or more is there (the tail of a burst): take it rather than wait; less, wait for the chunk.
      if (partial && remaining * 2 >= cost && remaining < cost) {
        this.#fetch(k, remaining, false);
        return;
      }
      // Exactly when the chunk fits; a refusal with no wait (cannot happen: cost <= burst) retries after 1 ms.
      k.timer = timers.setTimeout(
        () => {
          k.timer = undefined;
          k.busy = false;
          this.#pump(k);
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
    const outcome = (d: Awaited<ReturnType<Store['consume']>>) =>
      done(d.allowed || d.degraded !== undefined, d.now, d.outcomes[0]?.retryAfterMs ?? 1, d.outcomes[0]?.remaining ?? 0);
    const t = this.#o.now();
    if (store.consumeSync !== undefined) {
      let d: ReturnType<NonNullable<Store['consumeSync']>>;
      try {
        d = store.consumeSync(ops, t);
      } catch (err) {
        failed(err);
        return;
      }
      outcome(d);
      return;
    }
    store.consume(ops, t).then(outcome, failed);
  }

  #release(id: string, k: KeyPool): void {
    k.users -= 1;
    this.#responses -= 1;
    if (k.users > 0) {
      this.#pump(k);
      return;
    }
    this.#keys.delete(id);
    k.dead = true;
    if (k.timer !== undefined) this.#o.timers.clearTimeout(k.timer);
    k.timer = undefined;
    const unused = k.pool;
    k.pool = 0;
    if (unused > 0) this.#giveBack(k.ops, unused, k.at);
  }

  /** Returns bytes counted at `at` and never sent. */
  #giveBack(ops: StoreOp[], bytes: number, at: number): void {
    if (this.#closed && !this.#o.refundAfterClose) return;
    this.#o.store
      .refund(
        ops.map((op) => ({ ...op, cost: bytes })),
        at,
        this.#o.now(),
      )
      .catch((err: unknown) => publishStoreError(err, undefined, this.#o.name, 'allow'));
  }
}
