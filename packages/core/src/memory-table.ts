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
 * Both keep the Map's insertion order, which the store's eviction relies on (oldest first).
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
  /** Drops expired states (at most `limit` looked at, oldest first; all when omitted). Returns the number dropped. */
  sweep(now: number, limit?: number): number;
  /** Drops the oldest state. */
  dropOldest(): boolean;
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
    this.#blocks?.delete(key);
    this.#free.push(row);
  }

  delete(key: string): boolean {
    const row = this.#index.get(key);
    if (row === undefined) return false;
    this.#drop(key, row);
    return true;
  }

  sweep(now: number, limit = Number.POSITIVE_INFINITY): number {
    let dropped = 0;
    let seen = 0;
    for (const [key, row] of this.#index) {
      if (seen++ >= limit) break;
      const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
      if ((page[(row & MASK) * this.#stride] as number) <= now) {
        this.#drop(key, row);
        dropped++;
      }
    }
    return dropped;
  }

  dropOldest(): boolean {
    const first = this.#index.entries().next();
    if (first.done) return false;
    this.#drop(first.value[0], first.value[1]);
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
      this.#map.delete(key);
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
    return this.#map.delete(key);
  }

  sweep(now: number, limit = Number.POSITIVE_INFINITY): number {
    let dropped = 0;
    let seen = 0;
    for (const [k, slot] of this.#map) {
      if (seen++ >= limit) break;
      if (slot.x <= now) {
        this.#map.delete(k);
        dropped++;
      }
    }
    return dropped;
  }

  dropOldest(): boolean {
    const first = this.#map.keys().next();
    if (first.done) return false;
    this.#map.delete(first.value);
    return true;
  }
}
