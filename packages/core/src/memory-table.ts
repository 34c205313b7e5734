/**
 * The per-rule tables behind `MemoryStore`: where a (rule, key) state lives.
 *
 * A `SlabTable` holds fixed-width states (the registry's `width`) in pages of a
 * `Float64Array`, one row per key: `[expiresAt, s0, s1, ...]`, found through a
 * `Map<string, row>` whose values are small integers. A key costs its string, one Map entry
 * and `8·(width + 1)` bytes, instead of a slot object and a state array (about half the
 * memory; no object per key for the collector to trace). Blocks (`blockFor`) are rare and
 * live in a separate sparse map.
 *
 * An `ObjectTable` holds variable-width states (sliding-log, sliding-buckets) as objects.
 *
 * Both keep their keys in two Maps (`Keys`): the live ones and the held ones (whose last
 * decision refused, blocked ones included), each in insertion order, which the store's
 * eviction relies on (expired first, then the oldest live state, a held one only when no
 * live state is left), finding the oldest of each through an `OldestCursor` in amortised O(1).
 *
 * A decision finds each rule's state (`find`, into a `Found`) and writes what its verdict
 * says there (`commit`); nothing found is kept past the decision.
 */
import { registry, type State } from './algorithms/index.js';
import { type Entry, nextState, type RuleJudgement, Site } from './stack.js';
import type { AlgorithmName, RuleSpec } from './types.js';

/** Where a decision found a key's state: the site the kernel reads, and the key's row and standing. */
export class Found extends Site {
  /** The key's row in a SlabTable (0 for an ObjectTable's key), -1 when the key has no state. */
  row = -1;
  /** Whether the key is held (its last decision refused). */
  held = false;
}

export interface Table {
  /** The algorithm whose states the table holds. */
  readonly algorithm: AlgorithmName;
  readonly size: number;
  /** States that eviction may take: those whose last decision did not refuse. */
  readonly liveSize: number;
  /**
   * Finds `key`'s state for a decision into `f`; an expired one is dropped. `r`: the rule
   * deciding now, when its numbers may differ from those the state was written under.
   */
  find(key: string, now: number, f: Found, r?: RuleSpec): void;
  /**
   * Writes a committed verdict where `f` found the key (`f.row` -1: looked up again): its
   * next state when `v.write` (else the state stays), the block `b` and the expiry `x`, the
   * key held or not. Returns true if the key is new.
   */
  commit(key: string, f: Found, v: RuleJudgement, b: number, x: number, hold: boolean): boolean;
  /** The state for `key`, or undefined; an expired one is dropped (`r`: as in `find`). */
  read(key: string, now: number, r?: RuleSpec): State | undefined;
  /** The block deadline of the last `read` (0 when none). */
  readonly block: number;
  /** Whether the key of the last `read` is held: its last decision refused (or blocked). */
  readonly held: boolean;
  /** Stores an entry's state (undefined: none) with its block and expiry, held or not. Returns true if the key is new. */
  write(key: string, s: State | undefined, b: number, x: number, hold: boolean): boolean;
  /** Marks a key that is present as held: a refusal that writes nothing. */
  hold(key: string): void;
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

/** A table for `algorithm`'s states. */
export function tableFor(algorithm: AlgorithmName): Table {
  return registry[algorithm].width === 0 ? new ObjectTable(algorithm) : new SlabTable(algorithm);
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
 * until some key is held.
 */
class Keys<V> {
  readonly live = new Map<string, V>();
  readonly held = new Map<string, V>();
  readonly #oldestLive = new OldestCursor(this.live);
  readonly #oldestHeld = new OldestCursor(this.held);
  /** Whether the key of the last `get` was held. */
  wasHeld = false;

  get size(): number {
    return this.live.size + this.held.size;
  }

  get(key: string): V | undefined {
    let v = this.live.get(key);
    if (v !== undefined || this.held.size === 0) this.wasHeld = false;
    else {
      v = this.held.get(key);
      this.wasHeld = v !== undefined;
    }
    return v;
  }

  /** Adds a key (not in either map) as live or held. */
  add(key: string, v: V, hold: boolean): void {
    (hold ? this.held : this.live).set(key, v);
  }

  /** Moves a key from the map `was` says to the one `hold` says. */
  place(key: string, v: V, was: boolean, hold: boolean): void {
    if (hold === was) return;
    if (hold) {
      this.live.delete(key);
      this.#oldestLive.dropped(key);
      this.held.set(key, v);
    } else {
      this.held.delete(key);
      this.#oldestHeld.dropped(key);
      this.live.set(key, v);
    }
  }

  delete(key: string): boolean {
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

export class SlabTable implements Table {
  readonly #keys = new Keys<number>();
  readonly algorithm: AlgorithmName;
  readonly #w: number;
  readonly #stride: number;
  readonly #pages: Float64Array[] = [];
  readonly #free: number[] = [];
  #next = 0;
  #blocks: Map<string, number> | undefined;
  readonly #found = new Found();
  held = false;
  block = 0;

  constructor(algorithm: AlgorithmName) {
    this.algorithm = algorithm;
    this.#w = registry[algorithm].width;
    this.#stride = this.#w + 1;
  }

  get size(): number {
    return this.#keys.size;
  }

  get liveSize(): number {
    return this.#keys.live.size;
  }

  find(key: string, now: number, f: Found, r?: RuleSpec): void {
    const keys = this.#keys;
    const row = keys.get(key);
    f.held = keys.wasHeld;
    f.block = 0;
    f.row = -1;
    f.has = false;
    if (row === undefined) return;
    const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
    const o = (row & MASK) * this.#stride;
    if ((page[o] as number) <= now && !this.#fullLater(page, o, now, r)) {
      this.#drop(key, row);
      f.held = false;
      return;
    }
    if (this.#blocks !== undefined) f.block = this.#blocks.get(key) ?? 0;
    f.row = row;
    f.s = page;
    f.o = o + 1;
    // NaN marks "no algorithm state" (a key that is only blocked).
    f.has = !Number.isNaN(page[o + 1]);
  }

  commit(key: string, f: Found, v: RuleJudgement, b: number, x: number, hold: boolean): boolean {
    let row = f.row;
    let fresh = false;
    if (row < 0) {
      row = this.#rowFor(key, hold);
      fresh = this.#added;
    } else this.#keys.place(key, row, f.held, hold);
    const page = this.#pages[row >>> PAGE_BITS] as Float64Array;
    const o = (row & MASK) * this.#stride;
    page[o] = x;
    if (v.write) {
      page[o + 1] = v.n0;
      if (this.#w > 1) {
        page[o + 2] = v.n1;
        if (this.#w > 2) page[o + 3] = v.n2;
      }
    } else if (fresh) page[o + 1] = Number.NaN;
    if (b > 0) {
      this.#blocks ??= new Map();
      this.#blocks.set(key, b);
    } else if (this.#blocks !== undefined && (f.block !== 0 || f.row < 0)) this.#blocks.delete(key);
    return fresh;
  }

  /**
   * Whether a state past the expiry it was written with still matters under `r`, for an
   * algorithm whose expiry follows the rule (`expiryMoves`: a token bucket whose burst or rate
   * was raised since, by `update` or a value of the request, is full later): it is kept until
   * then. Re-stamps the row's expiry when so.
   */
  #fullLater(page: Float64Array, o: number, now: number, r: RuleSpec | undefined): boolean {
    const def = registry[this.algorithm];
    if (r === undefined || !def.expiryMoves || Number.isNaN(page[o + 1])) return false;
    const x = def.expiresAt(Array.from(page.subarray(o + 1, o + 1 + this.#w)), r);
    if (x <= now) return false;
    page[o] = x;
    return true;
  }

  read(key: string, now: number, r?: RuleSpec): State | undefined {
    const f = this.#found;
    this.find(key, now, f, r);
    this.held = f.held;
    this.block = f.block;
    if (!f.has) return undefined;
    const s: State = [];
    for (let i = 0; i < this.#w; i++) s.push(f.s[f.o + i] as number);
    return s;
  }

  /** Whether the last `#rowFor` added its key. */
  #added = false;

  /** The key's row, made when it has none (`#added` tells), the key placed live or held as `hold` says. */
  #rowFor(key: string, hold: boolean): number {
    const keys = this.#keys;
    let row = keys.get(key);
    this.#added = row === undefined;
    if (row === undefined) {
      row = this.#free.pop() ?? this.#next++;
      if (row >>> PAGE_BITS >= this.#pages.length) this.#pages.push(new Float64Array(PAGE * this.#stride));
      keys.add(key, row, hold);
    } else keys.place(key, row, keys.wasHeld, hold);
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

  hold(key: string): void {
    const row = this.#keys.get(key);
    if (row !== undefined) this.#keys.place(key, row, this.#keys.wasHeld, true);
  }

  #drop(key: string, row: number): void {
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
  held = false;
  block = 0;

  constructor(algorithm: AlgorithmName) {
    this.algorithm = algorithm;
  }

  get size(): number {
    return this.#keys.size;
  }

  get liveSize(): number {
    return this.#keys.live.size;
  }

  find(key: string, now: number, f: Found, _r?: RuleSpec): void {
    const slot = this.#keys.get(key);
    f.held = this.#keys.wasHeld;
    f.block = 0;
    f.row = -1;
    f.has = false;
    f.log = undefined;
    if (slot === undefined) return;
    if (slot.x <= now) {
      this.#keys.delete(key);
      f.held = false;
      return;
    }
    f.row = 0;
    f.block = slot.b;
    f.log = slot.s;
    f.has = slot.s !== undefined;
  }

  commit(key: string, f: Found, v: RuleJudgement, b: number, x: number, hold: boolean): boolean {
    return this.write(key, v.write ? nextState(registry[this.algorithm], v) : f.log, b, x, hold);
  }

  read(key: string, now: number, _r?: RuleSpec): State | undefined {
    const slot = this.#keys.get(key);
    this.held = this.#keys.wasHeld;
    this.block = 0;
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
      keys.place(key, slot, keys.wasHeld, hold);
      return false;
    }
    keys.add(key, { s, b, x }, hold);
    return true;
  }

  hold(key: string): void {
    const slot = this.#keys.get(key);
    if (slot !== undefined) this.#keys.place(key, slot, this.#keys.wasHeld, true);
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
