/**
 * The leases one store holds, by Redis key, and their give-backs: units not used go back to
 * Redis (the store's refund, at the lease's time) when a lease ends (found expired, replaced,
 * by the one sweep timer, on close), and a refund or settle of a decision made from a live
 * lease goes back to the lease instead. A tick's give-backs share one Redis call (the store
 * sends them in its batch).
 */
import type { StoreOp } from '@tollgate/core';
import { fresh, type Lease, liveAt, opOf } from './lease.js';

/** Gives units back in Redis, as a refund of a decision made at `at`; never rejects. */
export type GiveBack = (ops: readonly StoreOp[], at: number, t: number | undefined) => Promise<void>;

export class LeaseTable {
  readonly #ttlMs: number;
  readonly #maxKeys: number;
  readonly #giveBackOps: GiveBack;
  /** Live leases by Redis key. */
  readonly #table = new Map<string, Lease>();
  /** The last supplied time seen: a sweep gives back supplied-time leases at it. */
  #lastGiven = Number.NEGATIVE_INFINITY;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Closing: no sweep is armed again (close gives every lease back). */
  #closing = false;

  constructor(ttlMs: number, maxKeys: number, giveBack: GiveBack) {
    this.#ttlMs = ttlMs;
    this.#maxKeys = maxKeys;
    this.#giveBackOps = giveBack;
  }

  get size(): number {
    return this.#table.size;
  }

  get(k: string): Lease | undefined {
    return this.#table.get(k);
  }

  /** A decision at supplied time `t` was asked: give-backs of supplied-time leases run at the latest. */
  saw(t: number | undefined): void {
    if (t !== undefined && t > this.#lastGiven) this.#lastGiven = t;
  }

  live(l: Lease, t: number | undefined): boolean {
    return liveAt(l, t, Date.now());
  }

  /** A new lease of key `k` (or the entry of an exact decision, `left` 0, recording demand). */
  install(k: string, l: Lease): void {
    const old = this.#table.get(k);
    if (old !== undefined && !old.dead && old.rule === l.rule && old.given === l.given && fresh(old, Date.now())) {
      // Decided meanwhile in the same span (a tick's exact decisions of one key): one entry, their demand summed.
      if (l.left === 0) {
        old.used += l.used;
        return;
      }
      // Another call leased this key meanwhile: one lease per key, the newer goes back.
      if (old.left > 0) {
        this.giveBack(l);
        return;
      }
    }
    if (old !== undefined) this.end(k, old);
    else if (this.#table.size >= this.#maxKeys) {
      // Full (a flood of distinct keys): the key keeps deciding exactly, its demand not
      // recorded; what was leased with this answer goes back at once. The sweep frees room.
      this.giveBack(l);
      return;
    }
    this.#table.set(k, l);
    // Closing: close() gives it back with the rest once the calls in flight are answered.
    if (this.#timer === undefined && !this.#closing) {
      // One sweep for every lease, not a timer per key.
      this.#timer = setInterval(this.#sweep, this.#ttlMs);
      this.#timer.unref();
    }
  }

  /** Units taken for a stack that was refused go back where they came from. */
  putBack(ops: readonly StoreOp[], taken: readonly (Lease | undefined)[]): void {
    for (let i = 0; i < taken.length; i++) {
      const l = taken[i];
      if (l === undefined) continue;
      const cost = (ops[i] as StoreOp).cost;
      l.used -= cost;
      if (!l.dead) l.left += cost;
      else if (!l.dropped) void this.#giveBackOps([opOf(l, cost)], l.at, this.#timeOf(l));
    }
  }

  /** Ends a lease: it leaves the table and its unused units go back to Redis. */
  end(k: string, l: Lease): void {
    if (this.#table.get(k) === l) this.#table.delete(k);
    this.giveBack(l);
  }

  /** Takes key `k`'s lease out of the table (an operation by key ends it); undefined when none. */
  remove(k: string): Lease | undefined {
    const l = this.#table.get(k);
    if (l !== undefined) this.#table.delete(k);
    return l;
  }

  /**
   * Key `k`'s lease ends with the key's state (a `reset` on this instance): its units are
   * not given back, nor those a stack in flight took from it and puts back when refused,
   * which would credit the fresh state with units it never counted.
   */
  drop(k: string): void {
    const l = this.remove(k);
    if (l === undefined) return;
    l.dead = true;
    l.dropped = true;
  }

  /** A lease's unused units go back to Redis (once). */
  giveBack(l: Lease): Promise<void> {
    if (l.dead) return Promise.resolve();
    l.dead = true;
    if (l.left <= 0) return Promise.resolve();
    const cost = l.left;
    l.left = 0;
    return this.#giveBackOps([opOf(l, cost)], l.at, this.#timeOf(l));
  }

  /**
   * `units` of a decision made at `at` by `op` (key `k`) go back to the key's lease when it
   * is live and the decision was made during it (while a key's lease is live its decisions
   * are that lease's): they stay counted in Redis and are used within its ttl.
   */
  takeBack(k: string, op: StoreOp, units: number, at: number, t: number | undefined): boolean {
    const l = this.#table.get(k);
    if (l === undefined || l.dead || at < l.at || l.rule !== op.rule || !this.live(l, t) || l.left + units > l.granted) return false;
    l.left += units;
    l.used -= units;
    return true;
  }

  /**
   * The time a give-back of units counted at `t` runs at: Redis time (undefined), or the
   * latest supplied time seen. Never `t` alone once the clock has moved on: a sliding log
   * refunded at a time behind its newest entry takes from that entry, not the lease's.
   */
  latest(t: number | undefined): number | undefined {
    return t === undefined ? undefined : Math.max(t, this.#lastGiven);
  }

  #timeOf(l: Lease): number | undefined {
    return this.latest(l.given ? l.at : undefined);
  }

  readonly #sweep = (): void => {
    const t = this.#lastGiven === Number.NEGATIVE_INFINITY ? undefined : this.#lastGiven;
    for (const [k, l] of this.#table) {
      if (l.dead || !this.live(l, l.given ? t : undefined)) this.end(k, l);
    }
    if (this.#table.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  };

  /** The store is closing: the sweep stops and no new one is armed. */
  closing(): void {
    this.#closing = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Gives every lease back (the store is closing, and its calls in flight were answered). */
  async close(): Promise<void> {
    const all = [...this.#table.values()];
    this.#table.clear();
    await Promise.all(all.map((l) => this.giveBack(l)));
  }
}
