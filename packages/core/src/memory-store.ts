/**
 * `MemoryStore`: the default, in-process store.
 *
 * - O(1) per decision for every algorithm but sliding-log (O(entries in the window)) and
 *   sliding-buckets (O(non-empty blocks in the window), at most N).
 * - Bounded: at most `maxKeys` (rule, key) states. A new key arriving at the bound first
 *   drops expired states at the old end, then the oldest state that is neither refusing
 *   nor blocked; a refused or blocked one only when nothing else is left (counted:
 *   `heldEvictions`, and the `tollgate:memory-store:evicted` channel).
 * - Expired states are dropped lazily on read, and by a sweep on an unref'd interval
 *   (no per-key timers). `close()` clears the interval and all state.
 * - Decisions are synchronous inside, so a stack is atomic within the process.
 * - Fixed-width states live in typed-array slabs (memory-table.ts): under 100 bytes per key
 *   at a million keys, key string included (docs/benchmarks.md).
 */
import { registry, type State } from './algorithms/index.js';
import { type Clock, checkTime, systemClock } from './clock.js';
import { channels, type HeldEvictionMessage } from './diagnostics.js';
import { configError, describe, TollgateError } from './errors.js';
import { AppliedIds, applyKeyOp, keyFigures } from './key-ops.js';
import { MemoryPlan, type PlanStore, Scratch } from './memory-plan.js';
import { type Found, type Table, tableFor } from './memory-table.js';
import { checkRule, decideSites, type Entry, nextState, outcomeOf, type RuleJudgement, refundEntry, settleEntry, writes } from './stack.js';
import { unknownOptionFix } from './suggest.js';
import type { KeyOp, Outcome, RuleSpec, StackPlan, Store, StoreDecision, StoreKeyState, StoreOp } from './types.js';

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

/** The state a found key holds (for an expiry): its numbers as an array. */
function stateAt(f: Found, width: number): State | undefined {
  if (!f.has) return undefined;
  if (width === 0) return f.log;
  const s: State = [];
  for (let i = 0; i < width; i++) s.push(f.s[f.o + i] as number);
  return s;
}

/**
 * The default, in-process store: every decision is synchronous, so a stack is atomic
 * within the process. Bounded by `maxKeys`; expired states are dropped lazily and by an
 * unref'd sweep. One store may serve several limiters; `close()` releases its timer.
 * @example
 * const store = new MemoryStore({ maxKeys: 100_000 });
 * const limiter = createLimiter({ rules: [{ name: 'ip', rate: '100/min' }], store });
 * // on shutdown
 * await store.close();
 */
export class MemoryStore implements Store {
  readonly maxKeys: number;
  readonly #clock: Clock;
  /** One table per rule id, so keys never need joining with the rule's name. */
  readonly #tables = new Map<string, Table>();
  /** The objects `consumeSync` and `peek` decide in (a plan has its own). */
  readonly #scratch = new Scratch();
  /** Whether a decision is under way (an eviction's subscriber may decide meanwhile). */
  #busy = false;
  /** How a plan reaches this store. */
  readonly #planStore: PlanStore = {
    table: (r) => this.#table(r),
    decide: (ops, now, tables, sc) => this.#consume(ops, this.#now(now), tables, sc),
  };
  /** Latest time seen, so the sweep works on the limiter's clock too. */
  #latest = 0;
  /** Whether a limiter has passed its own time; then the sweep must not read this store's clock. */
  #external = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Operation ids applied (see keyOp). */
  readonly #ids = new AppliedIds();
  #closed = false;
  #heldEvictions = 0;

  constructor(options: MemoryStoreOptions = {}) {
    const { maxKeys = 1_000_000, clock = systemClock, sweepIntervalMs = 60_000, ...rest } = options;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `MemoryStore.${unknown}`,
        expected: 'maxKeys, clock or sweepIntervalMs',
        received: JSON.stringify(unknown),
        fix: unknownOptionFix(unknown, ['maxKeys', 'clock', 'sweepIntervalMs'], 'Remove the option.'),
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
    let n = 0;
    for (const t of this.#tables.values()) n += t.size;
    return n;
  }

  #now(now: number | undefined): number {
    if (this.#closed)
      throw new TollgateError('TG_STORE_CLOSED', 'MemoryStore: used after close(). Create a new store, or stop calling this one.');
    if (now !== undefined) this.#external = true;
    const t = checkTime(now ?? this.#clock.now(), 'MemoryStore: now');
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

  /** The table of a rule's states (made on first use). */
  #table(r: RuleSpec): Table {
    const t = this.#tables.get(r.id);
    if (t !== undefined && t.algorithm === r.algorithm) return t;
    // Rules sharing an id (a group) normally share an algorithm; one with another algorithm
    // gets a table of its own rather than reading numbers it cannot interpret.
    const id = t === undefined ? r.id : `${r.id}\u0000${r.algorithm}`;
    let other = this.#tables.get(id);
    if (other === undefined) {
      other = tableFor(r.algorithm);
      this.#tables.set(id, other);
    }
    return other;
  }

  #get(r: RuleSpec, key: string, now: number): Entry | undefined {
    const t = this.#table(r);
    const s = t.read(key, now, r);
    return s === undefined && t.block === 0 ? undefined : { s, b: t.block };
  }

  /** Writes a rule's entry; `hold`: the key refuses (see #evict). */
  #setIn(t: Table, r: RuleSpec, key: string, s: State | undefined, b: number, now: number, hold: boolean): void {
    const x = Math.max(s === undefined ? 0 : registry[r.algorithm].expiresAt(s, r), b);
    if (x <= now) {
      // Already equivalent to no state. Dropped rather than kept with a past expiry, which
      // would come back to life if the clock then went backwards (and Redis drops it too).
      t.delete(key);
      return;
    }
    if (t.write(key, s, b, x, hold) && this.size > this.maxKeys) this.#evict(t, key, now);
  }

  /**
   * Makes room after a new key (`key`, in table `written`): expired states at the old end
   * of every table first; else the oldest state that is neither refusing nor blocked, from
   * the table written to if it has one besides the new key, else from another; only when
   * no such state is left, the oldest held one (counted, and published on
   * `tollgate:memory-store:evicted`). So a flood of new keys never hands a refused or
   * blocked client a fresh budget while anything else can go.
   */
  #evict(written: Table, key: string, now: number): void {
    if (written.sweep(now, EVICT_SCAN) > 0) return;
    for (const t of this.#tables.values()) if (t !== written && t.sweep(now, EVICT_SCAN) > 0) return;
    if (written.evict(false, key) !== undefined) return;
    for (const t of this.#tables.values()) if (t !== written && t.evict(false, key) !== undefined) return;
    let gone = written.evict(true, key);
    let from = written;
    if (gone === undefined) {
      for (const t of this.#tables.values()) {
        if (t === written) continue;
        gone = t.evict(true, key);
        if (gone !== undefined) {
          from = t;
          break;
        }
      }
    }
    if (gone === undefined) return;
    this.#heldEvictions++;
    if (channels.memoryEvicted.hasSubscribers) {
      const message: HeldEvictionMessage = { store: this, ruleId: this.#idOf(from), key: gone, evictions: this.#heldEvictions };
      channels.memoryEvicted.publish(message);
    }
  }

  /** The rule id a table is kept under. */
  #idOf(t: Table): string {
    for (const [id, table] of this.#tables) if (table === t) return id;
    return '';
  }

  /**
   * How many refused or blocked states were evicted because `maxKeys` was reached with no
   * other state left to evict (each also published on `tollgate:memory-store:evicted`). Above
   * 0, `maxKeys` is too small for the clients being refused.
   */
  get heldEvictions(): number {
    return this.#heldEvictions;
  }

  /**
   * Prepares a stack (see `Store.prepare`): the plan finds each rule's table once and
   * decides synchronously, into objects of its own that its next decision overwrites.
   */
  prepare(rules: readonly RuleSpec[]): StackPlan {
    return new MemoryPlan(rules, this.#planStore);
  }

  consume(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    try {
      return Promise.resolve(this.consumeSync(ops, now));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The synchronous core of `consume`, for callers that can use it (the limiter, the simulator). */
  consumeSync(ops: readonly StoreOp[], now?: number): StoreDecision {
    return this.#fresh(ops, now, true);
  }

  peek(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    try {
      return Promise.resolve(this.#fresh(ops, now, false));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A decision without a plan, in outcomes of its own (`commit`: consume, else peek). */
  #fresh(ops: readonly StoreOp[], now: number | undefined, commit: boolean): StoreDecision {
    const t = this.#now(now);
    const sc = this.#busy ? new Scratch() : this.#scratch;
    sc.fit(ops.length);
    for (let i = 0; i < ops.length; i++) sc.tables[i] = this.#table((ops[i] as StoreOp).rule);
    const d = commit ? this.#consume(ops, t, sc.tables, sc) : this.#peek(ops, t, sc.tables, sc);
    const outcomes: Outcome[] = d.outcomes.map(outcomeOf);
    return { allowed: d.allowed, now: t, outcomes };
  }

  #peek(ops: readonly StoreOp[], t: number, tables: readonly Table[], sc: Scratch): StoreDecision {
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      (tables[i] as Table).find(op.key, t, sc.found[i] as Found, op.rule);
    }
    const d = sc.decision;
    d.allowed = decideSites(ops, sc.found, t, sc.verdicts);
    d.now = t;
    return d;
  }

  /**
   * The one decision path: every rule's state found where it lies, every rule decided once
   * (decideSites), then what the verdicts say written where the states were found.
   */
  #consume(ops: readonly StoreOp[], t: number, tables: readonly Table[], sc: Scratch): StoreDecision {
    const d = this.#peek(ops, t, tables, sc);
    const was = this.#busy;
    this.#busy = true;
    try {
      this.#commit(ops, t, tables, sc, d.allowed);
    } finally {
      this.#busy = was;
    }
    return d;
  }

  /** Writes a decided stack (see `writes`): states, blocks, and which keys are held. */
  #commit(ops: readonly StoreOp[], t: number, tables: readonly Table[], sc: Scratch, allowed: boolean): void {
    // Rows found stay where they are until a key leaves a table (a delete, an eviction).
    let moved = false;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const v = sc.verdicts[i] as RuleJudgement;
      const f = sc.found[i] as Found;
      const table = tables[i] as Table;
      if (moved) f.row = -1;
      if (!writes(v, allowed)) {
        // A refusal that writes nothing holds the key (see #evict).
        if (!v.allowed && !f.held) table.hold(op.key);
        continue;
      }
      const b = v.allowed ? 0 : v.block;
      const x = v.allowed ? v.x : this.#refusalExpiry(op.rule, v, f, b);
      if (x <= t) {
        // Already equivalent to no state. Dropped rather than kept with a past expiry, which
        // would come back to life if the clock then went backwards (and Redis drops it too).
        table.delete(op.key);
        moved = true;
        continue;
      }
      // Refused, or left empty: held, or a flood of new keys would evict it into a fresh
      // budget before its next request comes.
      const fresh = table.commit(op.key, f, v, b, x, !v.allowed || v.remaining === 0);
      if (fresh && this.size > this.maxKeys) {
        this.#evict(table, op.key, t);
        moved = true;
      }
    }
  }

  /** When a refusal's write (its penalty, its block) stops mattering. */
  #refusalExpiry(r: RuleSpec, v: RuleJudgement, f: Found, b: number): number {
    const def = registry[r.algorithm];
    const s = v.write ? nextState(def, v) : stateAt(f, def.width);
    return Math.max(s === undefined ? 0 : def.expiresAt(s, r), b);
  }

  refund(ops: readonly StoreOp[], at: number, now?: number): Promise<void> {
    try {
      const t = this.#now(now);
      // Every entry worked out from the state found before any is written, as a decision
      // does: two rules of one group on one key gave back twice what they took once.
      const after = ops.map((op) => {
        const entry = this.#get(op.rule, op.key, t);
        return entry === undefined ? entry : { e: refundEntry(entry, t, op.rule, op.cost, at) };
      });
      for (let i = 0; i < ops.length; i++) {
        const a = after[i];
        if (a === undefined) continue;
        const op = ops[i] as StoreOp;
        const table = this.#table(op.rule);
        // A refund changes the count, not whether the key's last decision refused.
        table.read(op.key, t, op.rule);
        if (a.e === undefined) table.delete(op.key);
        else this.#setIn(table, op.rule, op.key, a.e.s, a.e.b, t, table.held);
      }
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Settles a reservation (see `Store.settle`); synchronous inside, so atomic. */
  settle(ops: readonly StoreOp[], at: number, now?: number): Promise<void> {
    try {
      const t = this.#now(now);
      // From the states found before any is written (see refund).
      const after = ops.map((op) => (op.cost === 0 ? undefined : settleEntry(this.#get(op.rule, op.key, t), t, op.rule, op.cost, at)));
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i] as StoreOp;
        if (op.cost === 0) continue;
        const table = this.#table(op.rule);
        const e = after[i];
        table.read(op.key, t, op.rule);
        if (e === undefined) table.delete(op.key);
        // A key left in debt is held like a refused one: a flood of new keys must not evict
        // it into a fresh budget. A give-back leaves the mark as it was, as a refund does.
        else {
          const owes = op.cost > 0 && !checkRule(e, t, op.rule, 1).outcome.allowed;
          this.#setIn(table, op.rule, op.key, e.s, e.b, t, owes || table.held);
        }
      }
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  reset(rule: RuleSpec, key: string): Promise<void> {
    if (this.#closed) return Promise.reject(new TollgateError('TG_STORE_CLOSED', 'MemoryStore: used after close().'));
    this.#table(rule).delete(key);
    return Promise.resolve();
  }

  /** One operation on a key's state without a request (see key-ops.ts); synchronous inside, so atomic. */
  keyOp(rule: RuleSpec, key: string, op: KeyOp, now?: number): Promise<StoreKeyState> {
    try {
      const t = this.#now(now);
      const table = this.#table(rule);
      const before = this.#get(rule, key, t);
      // A retry of an operation already applied (same id) changes nothing: it reads.
      const fresh = this.#ids.first(rule, key, op, t);
      const after = fresh ? applyKeyOp(before, t, rule, op) : before;
      const state = keyFigures(after, t, rule);
      if (op.kind !== 'get' && fresh) {
        // A key left refusing (blocked, or penalized to empty) is held like a refused one:
        // a flood of new keys must not evict it into a fresh budget.
        if (after === undefined) table.delete(key);
        else this.#setIn(table, rule, key, after.s, after.b, t, state.retryAfterMs > 0);
      }
      return Promise.resolve(state);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Drops every expired state now. Runs by itself on the sweep interval. */
  sweep(now: number = this.#sweepTime()): number {
    let dropped = 0;
    for (const t of this.#tables.values()) dropped += t.sweep(now);
    return dropped;
  }

  close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#tables.clear();
    this.#ids.clear();
    this.#closed = true;
    return Promise.resolve();
  }
}
