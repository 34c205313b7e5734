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
import { algorithms, type Check, type State, Verdict } from './algorithms/index.js';
import { type Clock, checkTime, systemClock } from './clock.js';
import { channels, type HeldEvictionMessage } from './diagnostics.js';
import { configError, describe, TollgateError } from './errors.js';
import { AppliedIds, applyKeyOp, keyFigures } from './key-ops.js';
import { ObjectTable, SlabTable, STATE_WIDTH, type Table } from './memory-table.js';
import { checkRule, decideStack, type Entry, refundEntry, settleEntry } from './stack.js';
import { unknownOptionFix } from './suggest.js';
import type { KeyOp, Outcome, RuleSpec, Store, StoreDecision, StoreKeyState, StoreOp } from './types.js';

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

/**
 * The limiter's way into a MemoryStore: `consumeSync` with its outcomes in objects the store
 * reuses, overwritten by its next decision (so a decision makes no object per rule in the
 * store). Internal to core: the limiter builds its rule results from them at once.
 */
export const DECIDE = Symbol('tollgate.memory-store.decide');

/** A sliding-log check's figures and next state, in a reused verdict. */
function verdictOf(c: Check, v: Verdict): void {
  v.allowed = c.allowed;
  v.remaining = c.remaining;
  v.resetMs = c.resetMs;
  v.retryAfterMs = c.retryAfterMs;
  v.delayMs = c.delayMs;
  v.reason = c.reason;
  v.x = c.x;
  v.write = c.next !== undefined;
  v.next = c.next;
}

/**
 * The row the op at one position of the last decision found, kept for the next decision
 * given that same op (a constant key, or one client's run of requests): valid while its
 * table's `epoch` is the one it was found at, and its expiry is still ahead. Kept only while
 * that table is the position's table in `#atTables` (the one a decision writes through):
 * any lookup at the position lets it go first.
 */
class Found {
  op: StoreOp | undefined = undefined;
  table: SlabTable | undefined = undefined;
  epoch = -1;
  row = -1;
  held = false;
  page: Float64Array = new Float64Array(0);
  off = 0;
}

const EVICT_SCAN = 8;
/** Rules whose tables are found by identity before the map is asked. */
const RECENT_RULES = 8;

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
  /** The tables of the rules last asked for, by rule identity (a stack asks for the same few). */
  #recentRules: RuleSpec[] = [];
  #recentTables: Table[] = [];
  /**
   * The rules of the last decision by position, and their tables: a limiter hands over the
   * same rules in the same order every time, so the i-th rule's table costs one comparison.
   * A decision reads its tables back from `#atTables` when it writes (no array of its own).
   */
  #atRules: (RuleSpec | undefined)[] = [];
  #atTables: Table[] = [];
  /** The rows the last decision found, by position (see Found). */
  #found: Found[] = [];
  /** The verdicts of the decision being made, and the decision that holds them (see DECIDE). */
  readonly #verdicts: Verdict[] = [];
  readonly #decision: StoreDecision = { allowed: false, now: 0, outcomes: this.#verdicts };
  /** Whether a decision is writing its states (an eviction's subscriber may decide meanwhile). */
  #writing = false;
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
    // A limiter asks for the same rules' tables on every decision: found by identity.
    const recent = this.#recentRules;
    for (let i = 0; i < recent.length; i++) if (recent[i] === r) return this.#recentTables[i] as Table;
    const t = this.#tables.get(r.id);
    if (t !== undefined && t.algorithm === r.algorithm) {
      if (recent.length >= RECENT_RULES) {
        recent.length = 0;
        this.#recentTables.length = 0;
      }
      recent.push(r);
      this.#recentTables.push(t);
      return t;
    }
    // Rules sharing an id (a group) normally share an algorithm; one with another algorithm
    // gets a table of its own rather than reading numbers it cannot interpret.
    const id = t === undefined ? r.id : `${r.id}\u0000${r.algorithm}`;
    let other = this.#tables.get(id);
    if (other === undefined) {
      other = STATE_WIDTH[r.algorithm] === 0 ? new ObjectTable(r.algorithm) : new SlabTable(r.algorithm);
      this.#tables.set(id, other);
    }
    return other;
  }

  /** The table of the rule at position `i` of a stack, remembered for the next decision. */
  #tableAt(r: RuleSpec, i: number): Table {
    const t = this.#table(r);
    this.#atRules[i] = r;
    this.#atTables[i] = t;
    return t;
  }

  #get(r: RuleSpec, key: string, now: number): Entry | undefined {
    const t = this.#table(r);
    const s = t.read(key, now, r);
    return s === undefined && t.block === 0 ? undefined : { s, b: t.block };
  }

  /** Writes a rule's entry; `hold`: the decision refused (see memory-table.ts). */
  #set(r: RuleSpec, key: string, s: State | undefined, b: number, now: number, hold: boolean): void {
    this.#setIn(this.#table(r), r, key, s, b, now, hold);
  }

  #setIn(t: Table, r: RuleSpec, key: string, s: State | undefined, b: number, now: number, hold: boolean): void {
    const x = Math.max(s === undefined ? 0 : algorithms[r.algorithm].expiresAt(s, r), b);
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

  consume(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    try {
      return Promise.resolve(this.consumeSync(ops, now));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The synchronous core of `consume`, for callers that can use it (the limiter, the simulator). */
  consumeSync(ops: readonly StoreOp[], now?: number): StoreDecision {
    const d = this[DECIDE](ops, now);
    if (d !== this.#decision) return d;
    // The verdicts are this store's to reuse: the caller gets outcomes of its own.
    const outcomes: Outcome[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const v = d.outcomes[i] as Outcome;
      outcomes[i] = {
        allowed: v.allowed,
        remaining: v.remaining,
        resetMs: v.resetMs,
        retryAfterMs: v.retryAfterMs,
        delayMs: v.delayMs,
        reason: v.reason,
      };
    }
    return { allowed: d.allowed, now: d.now, outcomes };
  }

  /**
   * `consumeSync` for the limiter: the same decision, returned in objects this store reuses
   * (valid until its next decision; see DECIDE). The common cases, a stack whose rules all
   * admit and one refused by plain refusals (none blocked, counting the refusal or blocking
   * for it), are decided here on the states where they lie, without an object per rule;
   * the rest by the general verdicts (decideStack).
   */
  [DECIDE](ops: readonly StoreOp[], now?: number): StoreDecision {
    const t = this.#now(now);
    // Decided again while this one writes (from an eviction's subscriber): objects of its own.
    if (this.#writing) return this.#decideStack(ops, t);
    const n = ops.length;
    const verdicts = this.#verdicts;
    const found = this.#found;
    while (verdicts.length < n) verdicts.push(new Verdict());
    while (found.length < n) found.push(new Found());
    const atRules = this.#atRules;
    let allowed = true;
    // Every state is read and decided before any is written, as in decideStack (two rules of
    // one group may name the same key).
    for (let i = 0; i < n; i++) {
      const op = ops[i] as StoreOp;
      const r = op.rule;
      const v = verdicts[i] as Verdict;
      const f = found[i] as Found;
      // The op this position found its row for last time, in a table unchanged since (so
      // at the same row, held and unblocked as then) and not expired: no lookup at all.
      // That op passed the checks below when its row was found, and ops never change.
      if (f.op === op && f.epoch === (f.table as SlabTable).epoch && (f.page[f.off] as number) > t) {
        v.row = f.row;
        v.held = f.held;
        v.block = 0;
        v.page = f.page;
        v.off = f.off;
        const o = f.off + 1;
        (f.table as SlabTable).kernel(f.page, o, !Number.isNaN(f.page[o]), t, r, op.cost, v);
      } else if (op.cost > r.maxCost) return this.#decideStack(ops, t);
      else {
        // Let go before the lookup: it may make another rule's table this position's
        // (`#atTables`, which the writes below go through) and then return for a block,
        // and a row kept for this position is read only where that table is its own.
        f.op = undefined;
        const table = atRules[i] === r ? (this.#atTables[i] as Table) : this.#tableAt(r, i);
        const kernel = table.kernel;
        if (kernel === undefined) {
          const s = table.read(op.key, t, r);
          if (table.block > t) return this.#decideStack(ops, t);
          verdictOf(algorithms[r.algorithm].check(s, t, r, op.cost), v);
          v.row = -1;
          v.held = table.held;
          v.block = table.block;
        } else {
          const slab = table as SlabTable;
          const row = slab.find(op.key, t, r);
          if (slab.block > t) return this.#decideStack(ops, t);
          v.row = row;
          v.held = slab.held;
          v.block = slab.block;
          v.page = slab.page;
          v.off = slab.off;
          if (row >= 0 && slab.block === 0) {
            f.op = op;
            f.table = slab;
            f.epoch = slab.epoch;
            f.row = row;
            f.held = slab.held;
            f.page = slab.page;
            f.off = slab.off;
          }
          const o = slab.off + 1;
          kernel(slab.page, o, row >= 0 && !Number.isNaN(slab.page[o]), t, r, op.cost, v);
        }
      }
      if (!v.allowed) {
        // A refusal that writes (counted, or a block) needs the general verdict.
        if (v.write || r.blockForMs > 0) return this.#decideStack(ops, t);
        if (!r.dryRun) allowed = false;
      }
    }
    if (!allowed) this.#untouched(ops, t);
    // Taken now: close() from an eviction's subscriber replaces the arrays.
    const tables = this.#atTables;
    this.#writing = true;
    try {
      // Rows found above stay valid until a key leaves a table (a delete, an eviction).
      let moved = false;
      for (let i = 0; i < n; i++) {
        const op = ops[i] as StoreOp;
        const v = verdicts[i] as Verdict;
        const table = tables[i] as Table;
        if (!v.allowed) {
          // A plain refusal writes nothing but holds the key (see #evict).
          if (!v.held) table.hold(op.key);
        } else if (allowed) {
          if (moved) v.row = -1;
          if (v.x <= t) {
            // Already equivalent to no state: dropped (see #setIn).
            table.delete(op.key);
            moved = true;
          } else {
            const fresh = table.admit(op.key, v, v.x);
            // Left empty, the key refuses its next request: held as a refused one, or a flood
            // of new keys would evict it into a fresh budget before that request comes.
            if (v.remaining === 0) table.hold(op.key);
            if (fresh && this.size > this.maxKeys) {
              this.#evict(table, op.key, t);
              moved = true;
            }
          }
        }
      }
    } finally {
      this.#writing = false;
    }
    const d = this.#decision;
    d.allowed = allowed;
    d.now = t;
    return d;
  }

  /**
   * The admitting rules of a refused stack consumed nothing: each reports the state it found,
   * as `untouched` (stack.ts) does, decided again at cost 0 where the first pass read it
   * (before any write, so every row found is still where it was).
   */
  #untouched(ops: readonly StoreOp[], t: number): void {
    const tables = this.#atTables;
    for (let i = 0; i < ops.length; i++) {
      const v = this.#verdicts[i] as Verdict;
      if (!v.allowed) continue;
      const op = ops[i] as StoreOp;
      const r = op.rule;
      const table = tables[i] as Table;
      const remaining = v.remaining + op.cost;
      if (table.kernel === undefined) v.resetMs = algorithms[r.algorithm].check(table.read(op.key, t, r), t, r, 0).resetMs;
      else {
        const o = v.off + 1;
        // A cost-0 check admits wherever the cost itself was admitted: v stays an admission.
        table.kernel(v.page, o, v.row >= 0 && !Number.isNaN(v.page[o]), t, r, 0, v);
      }
      v.remaining = remaining;
      v.delayMs = 0;
    }
  }

  /** A stack in general: every rule's verdict (checkRule), and the writes they call for. */
  #decideStack(ops: readonly StoreOp[], t: number): StoreDecision {
    const entries: (Entry | undefined)[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      entries[i] = this.#get(op.rule, op.key, t);
    }
    const d = decideStack(ops, entries, t);
    for (let i = 0; i < ops.length; i++) {
      const w = d.writes[i];
      const op = ops[i] as StoreOp;
      const o = d.outcomes[i] as Outcome;
      const refused = !o.allowed;
      // An admission that leaves the key empty holds it too (see DECIDE).
      if (w !== undefined) this.#set(op.rule, op.key, w.s, w.b, t, refused || o.remaining === 0);
      else if (refused) this.#table(op.rule).hold(op.key);
    }
    return { allowed: d.allowed, now: t, outcomes: d.outcomes };
  }

  peek(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    try {
      const t = this.#now(now);
      const d = decideStack(
        ops,
        ops.map((op) => this.#get(op.rule, op.key, t)),
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
    this.#recentRules = [];
    this.#recentTables = [];
    this.#atRules = [];
    this.#atTables = [];
    this.#found = [];
    this.#closed = true;
    return Promise.resolve();
  }
}
