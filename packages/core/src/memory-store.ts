/**
 * `MemoryStore` (SPEC 6.2): the default, in-process store.
 *
 * - O(1) per decision for every algorithm but sliding-log (O(entries in the window)).
 * - Bounded: at most `maxKeys` (rule, key) states. A new key arriving at the bound first
 *   drops expired states at the old end, then the oldest state.
 * - Expired states are dropped lazily on read, and by a sweep on an unref'd interval
 *   (no per-key timers). `close()` clears the interval and all state.
 * - Decisions are synchronous inside, so a stack is atomic within the process.
 */
import { type Clock, systemClock } from './clock.js';
import { configError, describe, TollgateError } from './errors.js';
import { checkRule, decideStack, type Entry, entryExpiresAt, refundEntry } from './stack.js';
import type { RuleSpec, Store, StoreDecision, StoreOp } from './types.js';

interface Slot extends Entry {
  /** expiry time (ms, store clock) */
  x: number;
}

export interface MemoryStoreOptions {
  /**
   * Most (rule, key) states kept at once.
   * @default 1_000_000
   */
  maxKeys?: number;
  /**
   * Time source when the limiter passes none.
   * @default systemClock
   */
  clock?: Clock;
  /**
   * How often expired states are swept, in ms. `0` disables the sweep (lazy expiry only).
   * @default 60_000
   */
  sweepIntervalMs?: number;
}

const EVICT_SCAN = 8;

export class MemoryStore implements Store {
  readonly maxKeys: number;
  readonly #clock: Clock;
  /** One map per rule id, so keys never need joining with the rule's name. */
  readonly #maps = new Map<string, Map<string, Slot>>();
  #size = 0;
  /** Latest time seen, so the sweep works on the limiter's clock too. */
  #latest = 0;
  /** Whether a limiter has passed its own time; then the sweep must not read this store's clock. */
  #external = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(options: MemoryStoreOptions = {}) {
    const { maxKeys = 1_000_000, clock = systemClock, sweepIntervalMs = 60_000, ...rest } = options;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `MemoryStore.${unknown}`,
        expected: 'maxKeys, clock or sweepIntervalMs',
        received: JSON.stringify(unknown),
        fix: 'Remove the option.',
      });
    }
    if (!Number.isSafeInteger(maxKeys) || maxKeys <= 0) {
      throw configError('TG_INVALID_OPTION', {
        path: 'MemoryStore.maxKeys',
        expected: 'a positive whole number',
        received: describe(maxKeys),
        fix: 'Set maxKeys to the most keys you can afford to hold (default 1000000).',
      });
    }
    if (typeof clock?.now !== 'function') {
      throw configError('TG_INVALID_OPTION', {
        path: 'MemoryStore.clock',
        expected: 'an object with now(): number',
        received: describe(clock),
        fix: 'Pass a Clock such as new ManualClock().',
      });
    }
    if (!Number.isFinite(sweepIntervalMs) || sweepIntervalMs < 0) {
      throw configError('TG_INVALID_OPTION', {
        path: 'MemoryStore.sweepIntervalMs',
        expected: 'a number of ms >= 0',
        received: describe(sweepIntervalMs),
        fix: 'Use 0 to disable the sweep.',
      });
    }
    this.maxKeys = maxKeys;
    this.#clock = clock;
    if (sweepIntervalMs > 0) {
      this.#timer = setInterval(() => this.sweep(), sweepIntervalMs);
      this.#timer.unref();
    }
  }

  /** Number of (rule, key) states currently held. */
  get size(): number {
    return this.#size;
  }

  #now(now: number | undefined): number {
    if (this.#closed)
      throw new TollgateError('TG_STORE_CLOSED', 'MemoryStore: used after close(). Create a new store, or stop calling this one.');
    if (now !== undefined) this.#external = true;
    const t = now ?? this.#clock.now();
    if (t > this.#latest) this.#latest = t;
    return t;
  }

  /**
   * The time the sweep judges expiry by. On the store's own clock that is simply now, so
   * states keep being dropped while traffic is idle; with times supplied by a limiter's
   * clock, which may run anywhere, it is the latest time a limiter supplied.
   */
  #sweepTime(): number {
    return this.#external ? this.#latest : Math.max(this.#latest, this.#clock.now());
  }

  #get(id: string, key: string, now: number): Slot | undefined {
    const map = this.#maps.get(id);
    const slot = map?.get(key);
    if (slot !== undefined && slot.x <= now) {
      (map as Map<string, Slot>).delete(key);
      this.#size--;
      return undefined;
    }
    return slot;
  }

  #set(r: RuleSpec, key: string, e: Entry, now: number): void {
    let map = this.#maps.get(r.id);
    if (map === undefined) {
      map = new Map();
      this.#maps.set(r.id, map);
    }
    const x = entryExpiresAt(e, r);
    const slot = map.get(key);
    if (x <= now) {
      // Already equivalent to no state. Dropped rather than kept with a past expiry, which
      // would come back to life if the clock then went backwards (and Redis drops it too).
      if (slot !== undefined) {
        map.delete(key);
        this.#size--;
      }
      return;
    }
    if (slot !== undefined) {
      slot.s = e.s;
      slot.b = e.b;
      slot.x = x;
      return;
    }
    if (this.#size >= this.maxKeys) this.#evict(map, now);
    map.set(key, { s: e.s, b: e.b, x });
    this.#size++;
  }

  /** Makes room for one: expired states at the old end first, else the oldest state. */
  #evict(preferred: Map<string, Slot>, now: number): void {
    const map = preferred.size > 0 ? preferred : [...this.#maps.values()].find((m) => m.size > 0);
    if (!map) return;
    let scanned = 0;
    let dropped = false;
    for (const [k, slot] of map) {
      if (slot.x <= now) {
        map.delete(k);
        this.#size--;
        dropped = true;
      }
      if (++scanned >= EVICT_SCAN) break;
    }
    if (!dropped) {
      const oldest = map.keys().next();
      if (!oldest.done) {
        map.delete(oldest.value);
        this.#size--;
      }
    }
  }

  consume(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    try {
      return Promise.resolve(this.consumeSync(ops, now));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The synchronous core of `consume`, for callers that can use it (the simulator). */
  consumeSync(ops: readonly StoreOp[], now?: number): StoreDecision {
    const t = this.#now(now);
    if (ops.length === 1) {
      // One rule: the stack is the rule, so its write (consumption, block or penalty) always lands.
      const op = ops[0] as StoreOp;
      const v = checkRule(this.#get(op.rule.id, op.key, t), t, op.rule, op.cost);
      if (v.write !== undefined) this.#set(op.rule, op.key, v.write, t);
      return { allowed: v.outcome.allowed || op.rule.dryRun, now: t, outcomes: [v.outcome] };
    }
    const entries: (Entry | undefined)[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      entries[i] = this.#get(op.rule.id, op.key, t);
    }
    const d = decideStack(ops, entries, t);
    for (let i = 0; i < ops.length; i++) {
      const w = d.writes[i];
      if (w !== undefined) {
        const op = ops[i] as StoreOp;
        this.#set(op.rule, op.key, w, t);
      }
    }
    return { allowed: d.allowed, now: t, outcomes: d.outcomes };
  }

  peek(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    try {
      const t = this.#now(now);
      const d = decideStack(
        ops,
        ops.map((op) => this.#get(op.rule.id, op.key, t)),
        t,
      );
      return Promise.resolve({ allowed: d.allowed, now: t, outcomes: d.outcomes });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  refund(ops: readonly StoreOp[], at: number, now?: number): Promise<void> {
    try {
      const t = this.#now(now);
      for (const op of ops) {
        const slot = this.#get(op.rule.id, op.key, t);
        if (slot === undefined) continue;
        const e = refundEntry(slot, t, op.rule, op.cost, at);
        if (e === undefined) this.#delete(op.rule.id, op.key);
        else this.#set(op.rule, op.key, e, t);
      }
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  reset(rule: RuleSpec, key: string): Promise<void> {
    if (this.#closed) return Promise.reject(new TollgateError('TG_STORE_CLOSED', 'MemoryStore: used after close().'));
    this.#delete(rule.id, key);
    return Promise.resolve();
  }

  #delete(id: string, key: string): void {
    const map = this.#maps.get(id);
    if (map?.delete(key)) this.#size--;
  }

  /** Drops every expired state now. Runs by itself on the sweep interval. */
  sweep(now: number = this.#sweepTime()): number {
    let dropped = 0;
    for (const map of this.#maps.values()) {
      for (const [k, slot] of map) {
        if (slot.x <= now) {
          map.delete(k);
          dropped++;
        }
      }
    }
    this.#size -= dropped;
    return dropped;
  }

  close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#maps.clear();
    this.#size = 0;
    this.#closed = true;
    return Promise.resolve();
  }
}
