/**
 * The per-rule tables behind `MemoryStore` (SPEC 6.2): where a (rule, key) state lives.
 *
 * A `SlabTable` holds fixed-width states (fixed-window 2 numbers, sliding-window 3,
 * token-bucket 2, leaky-bucket 1) in pages of a `Float64Array`, one row per key:
 * `[expiresAt, s0, s1, ...]`, found through a `Map<string, row>` whose values are small
 * integers. A key costs its string, one Map entry and `8·(width + 1)` bytes, instead of a
 * slot object and a state array (about half the memory; no object per key for the
 * collector to trace). Blocks (`blockFor`) are rare and live in a separate sparse map.
 *
 * An `ObjectTable` holds variable-width states (sliding-log) as objects, as before.
 *
 * Both keep the Map's insertion order, which the store's eviction relies on (oldest first),
 * and find their oldest state through an `OldestCursor` in amortised O(1).
 */
import type { State } from './algorithms/index.js';
import type { Entry } from './stack.js';
import type { AlgorithmName } from './types.js';

/** Numbers per state, for the algorithms whose state has a fixed width. */
export const STATE_WIDTH: Record<AlgorithmName, number> = {
  'fixed-window': 2,
  'sliding-window': 3,
  'token-bucket': 2,
  'leaky-bucket': 1,
  'sliding-log': 0, // variable: an ObjectTable
};

export interface Table {
  /** The algorithm whose states the table holds. */
  readonly algorithm: AlgorithmName;
  readonly size: number;
  /** The state for `key`, or undefined; an expired one is dropped. */
  read(key: string, now: number): State | undefined;
  /** The block deadline of the last `read` (0 when none). */
  readonly block: number;
  /** Stores a state (undefined: none) with its block and expiry. Returns true if the key is new. */
  write(key: string, s: State | undefined, b: number, x: number): boolean;
  delete(key: string): boolean;
  /**
   * Drops expired states. With `limit`, only at the old end: oldest first, stopping at the
   * first live state or after `limit` (amortised O(1), for eviction); without, all of them.
   * Returns the number dropped.
   */
  sweep(now: number, limit?: number): number;
  /** Drops the oldest state. */
  dropOldest(): boolean;
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

/** Rows per page: a page is allocated whole, so at most one page is ever slack. */
const PAGE_BITS = 12;
const PAGE = 1 << PAGE_BITS;
const MASK = PAGE - 1;

export class SlabTable implements Table {
  readonly #index = new Map<string, number>();
  readonly algorithm: AlgorithmName;
  readonly #w: number;
  readonly #stride: number;
  readonly #pages: Float64Array[] = [];
  readonly #free: number[] = [];
  #next = 0;
  #blocks: Map<string, number> | undefined;
  readonly #oldest = new OldestCursor(this.#index);
  block = 0;

  constructor(algorithm: AlgorithmName) {
    this.algorithm = algorithm;
    this.#w = STATE_WIDTH[algorithm];
    this.#stride = this.#w + 1;
  }

  get size(): number {
    return this.#index.size;
  }

  read(key: string, now: number): State | undefined {
    const row = this.#index.get(key);
    this.block = 0;
    if (row === undefined) return undefined;
    const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
    const o = (row & MASK) * this.#stride;
    if ((page[o] as number) <= now) {
      this.#drop(key, row);
      return undefined;
    }
    if (this.#blocks !== undefined) this.block = this.#blocks.get(key) ?? 0;
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

  write(key: string, s: State | undefined, b: number, x: number): boolean {
    let row = this.#index.get(key);
    const fresh = row === undefined;
    if (row === undefined) {
      row = this.#free.pop() ?? this.#next++;
      if (row >>> PAGE_BITS >= this.#pages.length) this.#pages.push(new Float64Array(PAGE * this.#stride));
      this.#index.set(key, row);
    }
    const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
    const o = (row & MASK) * this.#stride;
    page[o] = x;
    if (s === undefined) page[o + 1] = Number.NaN;
    else for (let i = 0; i < this.#w; i++) page[o + 1 + i] = s[i] as number;
    if (b > 0) {
      this.#blocks ??= new Map();
      this.#blocks.set(key, b);
    } else this.#blocks?.delete(key);
    return fresh;
  }

  #drop(key: string, row: number): void {
    this.#index.delete(key);
    this.#oldest.dropped(key);
    this.#blocks?.delete(key);
    this.#free.push(row);
  }

  delete(key: string): boolean {
    const row = this.#index.get(key);
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
      for (let e = this.#oldest.first(); e !== undefined && dropped < limit && this.#expiresAt(e[1]) <= now; e = this.#oldest.first()) {
        this.#drop(e[0], e[1]);
        dropped++;
      }
      return dropped;
    }
    for (const [key, row] of this.#index) {
      if (this.#expiresAt(row) <= now) {
        this.#drop(key, row);
        dropped++;
      }
    }
    return dropped;
  }

  dropOldest(): boolean {
    const first = this.#oldest.first();
    if (first === undefined) return false;
    this.#drop(first[0], first[1]);
    return true;
  }
}

interface Slot extends Entry {
  /** expiry time (ms, store clock) */
  x: number;
}

export class ObjectTable implements Table {
  readonly algorithm: AlgorithmName;
  readonly #map = new Map<string, Slot>();
  readonly #oldest = new OldestCursor(this.#map);
  block = 0;

  constructor(algorithm: AlgorithmName) {
    this.algorithm = algorithm;
  }

  get size(): number {
    return this.#map.size;
  }

  read(key: string, now: number): State | undefined {
    const slot = this.#map.get(key);
    this.block = 0;
    if (slot === undefined) return undefined;
    if (slot.x <= now) {
      this.delete(key);
      return undefined;
    }
    this.block = slot.b;
    return slot.s;
  }

  write(key: string, s: State | undefined, b: number, x: number): boolean {
    const slot = this.#map.get(key);
    if (slot !== undefined) {
      slot.s = s;
      slot.b = b;
      slot.x = x;
      return false;
    }
    this.#map.set(key, { s, b, x });
    return true;
  }

  delete(key: string): boolean {
    this.#oldest.dropped(key);
    return this.#map.delete(key);
  }

  sweep(now: number, limit?: number): number {
    let dropped = 0;
    if (limit !== undefined) {
      for (let e = this.#oldest.first(); e !== undefined && dropped < limit && e[1].x <= now; e = this.#oldest.first()) {
        this.delete(e[0]);
        dropped++;
      }
      return dropped;
    }
    for (const [k, slot] of this.#map) {
      if (slot.x <= now) {
        this.delete(k);
        dropped++;
      }
    }
    return dropped;
  }

  dropOldest(): boolean {
    const first = this.#oldest.first();
    if (first === undefined) return false;
    this.delete(first[0]);
    return true;
  }
}
