/**
 * The per-rule tables behind `MemoryStore`: where a (rule, key) state lives.
 *
 * A `SlabTable` holds fixed-width states (fixed-window 2 numbers, sliding-window 3,
 * token-bucket 2, leaky-bucket 1) in pages of a `Float64Array`, one row per key:
 * `[expiresAt, s0, s1, ...]`, found through a `Map<string, row>` whose values are small
 * integers. A key costs its string, one Map entry and `8·(width + 1)` bytes, instead of a
 * slot object and a state array (about half the memory; no object per key for the
 * collector to trace). Blocks (`blockFor`) are rare and live in a separate sparse map.
 *
 * An `ObjectTable` holds variable-width states (sliding-log, sliding-buckets) as objects.
 *
 * Both keep their keys in two Maps (`Keys`): the live ones and the held ones (whose last
 * decision refused, blocked ones included), each in insertion order, which the store's
 * eviction relies on (expired first, then the oldest live state, a held one only when no
 * live state is left), finding the oldest of each through an `OldestCursor` in amortised O(1).
 */
import { type Kernel, kernels, type State, type Verdict } from './algorithms/index.js';
import { tokenBucket } from './algorithms/token-bucket.js';
import type { Entry } from './stack.js';
import type { AlgorithmName, RuleSpec } from './types.js';

/** Numbers per state, for the algorithms whose state has a fixed width. */
export const STATE_WIDTH: Record<AlgorithmName, number> = {
  'fixed-window': 2,
  'sliding-window': 3,
  'token-bucket': 2,
  'leaky-bucket': 1,
  'sliding-log': 0, // variable: an ObjectTable
  'sliding-buckets': 0,
};

export interface Table {
  /** The algorithm whose states the table holds. */
  readonly algorithm: AlgorithmName;
  readonly size: number;
  /** States that eviction may take: those whose last decision did not refuse. */
  readonly liveSize: number;
  /**
   * The state for `key`, or undefined; an expired one is dropped. `r`: the rule deciding now,
   * when its numbers may differ from those the state was written under (see `find`).
   */
  read(key: string, now: number, r?: RuleSpec): State | undefined;
  /** The block deadline of the last `read` (0 when none). */
  readonly block: number;
  /** Whether the key of the last `read` is held: its last decision refused (or blocked). */
  readonly held: boolean;
  /**
   * Stores a state (undefined: none) with its block and expiry, held or not (see `held`).
   * Returns true if the key is new.
   */
  write(key: string, s: State | undefined, b: number, x: number, hold: boolean): boolean;
  /** Marks a key that is present as held: a refusal that writes nothing. */
  hold(key: string): void;
  /**
   * Writes an admitting verdict's next state with expiry `x`, the key live and not blocked
   * (a SlabTable: `v.n0`..., an ObjectTable: `v.next`). Returns true if the key is new.
   */
  admit(key: string, v: Verdict, x: number): boolean;
  /** The algorithm's kernel when its states live in a slab (a SlabTable), else undefined. */
  readonly kernel: Kernel | undefined;
  delete(key: string): boolean;
  /**
   * Drops expired states. With `limit`, only at the old end of the live and the held keys:
   * oldest first, stopping at the first live state or after `limit` each (amortised O(1),
   * for eviction); without, all of them. Returns the number dropped.
   */
  sweep(now: number, limit?: number): number;
  /** Drops the oldest live (with `held`: held) state other than `except`; returns its key. */
  evict(held: boolean, except: string): string | undefined;
}

/**
 * The oldest entry of a Map in amortised O(1). `map.keys().next()` walks every deleted
 * entry V8 still holds at the front of the table (they go only on a rehash), so evicting
 * oldest-first from a full store cost O(evictions since the last rehash) per decision:
 * ~50 µs instead of ~7 µs at 100 000 keys (bug: key flood at maxKeys is 7× slower per
 * decision). A live iterator kept between calls passes each deleted entry once.
 */
class OldestCursor<V> {
  readonly #map: Map<string, V>;
  #it: Iterator<[string, V]> | undefined;
  #head: [string, V] | undefined;

  constructor(map: Map<string, V>) {
    this.#map = map;
  }

  /** The oldest entry, or undefined when the map is empty. */
  first(): [string, V] | undefined {
    while (this.#head === undefined) {
      if (this.#map.size === 0) return undefined;
      this.#it ??= this.#map.entries();
      const n = this.#it.next();
      // An exhausted iterator stays exhausted: start again for entries added since.
      if (n.done) this.#it = undefined;
      else this.#head = n.value;
    }
    return this.#head;
  }

  /** To be called whenever `key` leaves the map. */
  dropped(key: string): void {
    if (this.#head !== undefined && this.#head[0] === key) this.#head = undefined;
  }
}

/**
 * A table's keys in two Maps, each in the order its keys entered it: `live`, the states
 * eviction may take, and `held`, the keys whose last decision refused (blocked ones
 * included), which eviction takes only when no live state is left. A key is in exactly
 * one of them, so the two cost no more memory per key than one Map; a lookup is one `get`
 * until some key is held, and none for the key found last.
 */
class Keys<V> {
  readonly live = new Map<string, V>();
  readonly held = new Map<string, V>();
  readonly #oldestLive = new OldestCursor(this.live);
  readonly #oldestHeld = new OldestCursor(this.held);
  /** Whether the key of the last `get` was held. */
  wasHeld = false;
  /**
   * The last key `get` found, with its value and map: a key asked for again (a rule's
   * constant key, a route or 'global', or one client's run of requests) skips the Map.
   */
  #lastKey: string | undefined = undefined;
  #lastValue: V | undefined = undefined;
  #lastHeld = false;

  get size(): number {
    return this.live.size + this.held.size;
  }

  get(key: string): V | undefined {
    if (key === this.#lastKey) {
      this.wasHeld = this.#lastHeld;
      return this.#lastValue;
    }
    let v = this.live.get(key);
    if (v !== undefined || this.held.size === 0) this.wasHeld = false;
    else {
      v = this.held.get(key);
      this.wasHeld = v !== undefined;
    }
    if (v !== undefined) {
      this.#lastKey = key;
      this.#lastValue = v;
      this.#lastHeld = this.wasHeld;
    }
    return v;
  }

  /** Adds a key (not in either map) as live or held. */
  add(key: string, v: V, hold: boolean): void {
    (hold ? this.held : this.live).set(key, v);
  }

  /** Moves a key found by the last `get` to the other map when `hold` says so. */
  place(key: string, v: V, hold: boolean): void {
    if (hold === this.wasHeld) return;
    if (hold) {
      this.live.delete(key);
      this.#oldestLive.dropped(key);
      this.held.set(key, v);
    } else {
      this.held.delete(key);
      this.#oldestHeld.dropped(key);
      this.live.set(key, v);
    }
    this.wasHeld = hold;
    if (key === this.#lastKey) this.#lastHeld = hold;
  }

  delete(key: string): boolean {
    if (key === this.#lastKey) {
      this.#lastKey = undefined;
      this.#lastValue = undefined;
    }
    if (this.live.delete(key)) {
      this.#oldestLive.dropped(key);
      return true;
    }
    if (this.held.size > 0 && this.held.delete(key)) {
      this.#oldestHeld.dropped(key);
      return true;
    }
    return false;
  }

  /** The oldest live (or held) entry, unless it is `except` (the key just written). */
  oldest(held: boolean, except?: string): [string, V] | undefined {
    const e = (held ? this.#oldestHeld : this.#oldestLive).first();
    return e === undefined || e[0] === except ? undefined : e;
  }
}

/** Rows per page: a page is allocated whole, so at most one page is ever slack. */
const PAGE_BITS = 12;
const PAGE = 1 << PAGE_BITS;
const MASK = PAGE - 1;
const NO_PAGE = new Float64Array(0);

export class SlabTable implements Table {
  readonly #keys = new Keys<number>();
  readonly algorithm: AlgorithmName;
  readonly #w: number;
  readonly #stride: number;
  readonly #pages: Float64Array[] = [];
  readonly #free: number[] = [];
  #next = 0;
  #blocks: Map<string, number> | undefined;
  /** Whether the last `#rowFor` added its key. */
  #added = false;
  block = 0;
  held = false;
  readonly kernel: Kernel;
  /**
   * The page and offset of the row the last `find` returned: its expiry at `page[off]`, its
   * state from `page[off + 1]` on (NaN there: a key that is only blocked).
   */
  page: Float64Array = NO_PAGE;
  off = 0;
  /**
   * Counts the changes that move a key's row or its standing: a key added, dropped or
   * evicted, placed among the held keys or back, blocked or unblocked. A row found at one
   * epoch is the same key's row, with the same held flag and block, at that epoch: the
   * store keeps the rows of a limiter's last decision and reuses them while it is unchanged.
   * An admission written into a live, unblocked row changes none of that.
   */
  epoch = 0;

  constructor(algorithm: AlgorithmName) {
    this.algorithm = algorithm;
    this.#w = STATE_WIDTH[algorithm];
    this.#stride = this.#w + 1;
    this.kernel = kernels[algorithm] as Kernel;
  }

  get size(): number {
    return this.#keys.size;
  }

  get liveSize(): number {
    return this.#keys.live.size;
  }

  /**
   * The row of `key` for a decision, or -1 (none, or expired and dropped), without making
   * an array of its state: sets `block`, `held`, and `page` and `off` (see there).
   */
  find(key: string, now: number, r?: RuleSpec): number {
    const keys = this.#keys;
    const row = keys.get(key);
    this.block = 0;
    this.held = keys.wasHeld;
    if (row === undefined) return -1;
    const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
    const o = (row & MASK) * this.#stride;
    if ((page[o] as number) <= now && !this.#fullLater(page, o, now, r)) {
      this.#drop(key, row);
      this.held = false;
      return -1;
    }
    if (this.#blocks !== undefined) this.block = this.#blocks.get(key) ?? 0;
    this.page = page;
    this.off = o;
    return row;
  }

  /**
   * Whether a token bucket past the expiry it was written with still matters under `r`: a
   * burst (or rate) raised since (`update`, a value of the request) makes it full later, and
   * its state is kept until then. Re-stamps the row's expiry when so.
   */
  #fullLater(page: Float64Array, o: number, now: number, r: RuleSpec | undefined): boolean {
    if (r === undefined || this.algorithm !== 'token-bucket' || Number.isNaN(page[o + 1])) return false;
    const x = tokenBucket.expiresAt([page[o + 1] as number, page[o + 2] as number], r);
    if (x <= now) return false;
    page[o] = x;
    return true;
  }

  read(key: string, now: number, r?: RuleSpec): State | undefined {
    if (this.find(key, now, r) < 0) return undefined;
    const page = this.page;
    const o = this.off;
    const s0 = page[o + 1] as number;
    // NaN marks "no algorithm state" (a key that is only blocked).
    if (Number.isNaN(s0)) return undefined;
    switch (this.#w) {
      case 1:
        return [s0];
      case 2:
        return [s0, page[o + 2] as number];
      default:
        return [s0, page[o + 2] as number, page[o + 3] as number];
    }
  }

  /** The key's row, made when it has none (`#added` tells), the key placed live or held as `hold` says. */
  #rowFor(key: string, hold: boolean): number {
    this.epoch++;
    const keys = this.#keys;
    let row = keys.get(key);
    this.#added = row === undefined;
    if (row === undefined) {
      row = this.#free.pop() ?? this.#next++;
      if (row >>> PAGE_BITS >= this.#pages.length) this.#pages.push(new Float64Array(PAGE * this.#stride));
      keys.add(key, row, hold);
    } else keys.place(key, row, hold);
    return row;
  }

  write(key: string, s: State | undefined, b: number, x: number, hold: boolean): boolean {
    const row = this.#rowFor(key, hold);
    const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
    const o = (row & MASK) * this.#stride;
    page[o] = x;
    if (s === undefined) page[o + 1] = Number.NaN;
    else for (let i = 0; i < this.#w; i++) page[o + 1 + i] = s[i] as number;
    if (b > 0) {
      this.#blocks ??= new Map();
      this.#blocks.set(key, b);
    } else this.#blocks?.delete(key);
    return this.#added;
  }

  /**
   * As `Table.admit`. When the verdict's `row` (from `find`, this decision) was neither held
   * nor blocked, straight into that row at the verdict's `page` and `off`: no Map lookup, no
   * page worked out again. The caller sets `v.row` to -1 when
   * rows may have moved since its `find` (an eviction or a delete in between).
   */
  admit(key: string, v: Verdict, x: number): boolean {
    let page = v.page;
    let o = v.off;
    let fresh = false;
    if (v.row < 0 || v.held || v.block !== 0) {
      const row = this.#rowFor(key, false);
      fresh = this.#added;
      this.#blocks?.delete(key);
      page = this.#pages[row >>> PAGE_BITS] as Float64Array;
      o = (row & MASK) * this.#stride;
    }
    page[o] = x;
    page[o + 1] = v.n0;
    if (this.#w > 1) {
      page[o + 2] = v.n1;
      if (this.#w > 2) page[o + 3] = v.n2;
    }
    return fresh;
  }

  hold(key: string): void {
    const row = this.#keys.get(key);
    if (row !== undefined) {
      this.epoch++;
      this.#keys.place(key, row, true);
    }
  }

  #drop(key: string, row: number): void {
    this.epoch++;
    this.#keys.delete(key);
    this.#blocks?.delete(key);
    this.#free.push(row);
  }

  delete(key: string): boolean {
    const row = this.#keys.get(key);
    if (row === undefined) return false;
    this.#drop(key, row);
    return true;
  }

  #expiresAt(row: number): number {
    return (this.#pages[row >>> PAGE_BITS] as Float64Array)[(row & MASK) * this.#stride] as number;
  }

  sweep(now: number, limit?: number): number {
    let dropped = 0;
    if (limit !== undefined) {
      for (const held of [false, true]) {
        let n = 0;
        for (let e = this.#keys.oldest(held); e !== undefined && n < limit && this.#expiresAt(e[1]) <= now; e = this.#keys.oldest(held)) {
          this.#drop(e[0], e[1]);
          n++;
        }
        dropped += n;
      }
      return dropped;
    }
    for (const map of [this.#keys.live, this.#keys.held]) {
      for (const [key, row] of map) {
        if (this.#expiresAt(row) <= now) {
          this.#drop(key, row);
          dropped++;
        }
      }
    }
    return dropped;
  }

  evict(held: boolean, except: string): string | undefined {
    const e = this.#keys.oldest(held, except);
    if (e === undefined) return undefined;
    this.#drop(e[0], e[1]);
    return e[0];
  }
}

interface Slot extends Entry {
  /** expiry time (ms, store clock) */
  x: number;
}

export class ObjectTable implements Table {
  readonly algorithm: AlgorithmName;
  readonly #keys = new Keys<Slot>();
  block = 0;
  held = false;
  readonly kernel = undefined;

  constructor(algorithm: AlgorithmName) {
    this.algorithm = algorithm;
  }

  get size(): number {
    return this.#keys.size;
  }

  get liveSize(): number {
    return this.#keys.live.size;
  }

  read(key: string, now: number): State | undefined {
    const slot = this.#keys.get(key);
    this.block = 0;
    this.held = this.#keys.wasHeld;
    if (slot === undefined) return undefined;
    if (slot.x <= now) {
      this.#keys.delete(key);
      this.held = false;
      return undefined;
    }
    this.block = slot.b;
    return slot.s;
  }

  write(key: string, s: State | undefined, b: number, x: number, hold: boolean): boolean {
    const keys = this.#keys;
    const slot = keys.get(key);
    if (slot !== undefined) {
      slot.s = s;
      slot.b = b;
      slot.x = x;
      keys.place(key, slot, hold);
      return false;
    }
    keys.add(key, { s, b, x }, hold);
    return true;
  }

  hold(key: string): void {
    const slot = this.#keys.get(key);
    if (slot !== undefined) this.#keys.place(key, slot, true);
  }

  admit(key: string, v: Verdict, x: number): boolean {
    return this.write(key, v.next, 0, x, false);
  }

  delete(key: string): boolean {
    return this.#keys.delete(key);
  }

  sweep(now: number, limit?: number): number {
    let dropped = 0;
    if (limit !== undefined) {
      for (const held of [false, true]) {
        let n = 0;
        for (let e = this.#keys.oldest(held); e !== undefined && n < limit && e[1].x <= now; e = this.#keys.oldest(held)) {
          this.#keys.delete(e[0]);
          n++;
        }
        dropped += n;
      }
      return dropped;
    }
    for (const map of [this.#keys.live, this.#keys.held]) {
      for (const [k, slot] of map) {
        if (slot.x <= now) {
          this.#keys.delete(k);
          dropped++;
        }
      }
    }
    return dropped;
  }

  evict(held: boolean, except: string): string | undefined {
    const e = this.#keys.oldest(held, except);
    if (e === undefined) return undefined;
    this.#keys.delete(e[0]);
    return e[0];
  }
}
