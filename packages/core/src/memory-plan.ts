/**
 * A MemoryStore's prepared stack (`Store.prepare`): each rule's table, found once. What the
 * store keeps for a limiter lives here and nowhere else: the tables (which live as long as
 * the store) and the objects one decision works in. No state, row or key outlives the
 * decision that found it, so no decision can read or write through another's.
 */
import { Found, type Table } from './memory-table.js';
import { RuleJudgement } from './stack.js';
import type { RuleSpec, StackPlan, StoreDecision, StoreOp } from './types.js';

/** The objects one decision works in: per op, where its state was found, its verdict and (when matched) its table. */
export class Scratch {
  readonly found: Found[] = [];
  readonly verdicts: RuleJudgement[] = [];
  tables: Table[] = [];
  readonly decision: StoreDecision = { allowed: false, now: 0, outcomes: [] };

  /** Room for a stack of `n` ops. */
  fit(n: number): void {
    const v = this.verdicts;
    while (v.length < n) {
      v.push(new RuleJudgement());
      this.found.push(new Found());
    }
    if (this.tables.length < n) this.tables = new Array(n);
    // The outcomes are the verdicts themselves, exactly one per op.
    if (this.decision.outcomes.length !== n) this.decision.outcomes = v.slice(0, n);
  }
}

/** How a plan reaches its store: a rule's table, and a decision on each op's table (`tables[i]`). */
export interface PlanStore {
  table(r: RuleSpec): Table;
  decide(ops: readonly StoreOp[], now: number | undefined, tables: readonly Table[], scratch: Scratch): StoreDecision;
}

/** Whether `op`'s rule is `spec` or one derived from it (a limit per request): one table. */
function sameState(r: RuleSpec, spec: RuleSpec): boolean {
  return r === spec || (r.id === spec.id && r.algorithm === spec.algorithm);
}

export class MemoryPlan implements StackPlan {
  readonly #specs: readonly RuleSpec[];
  readonly #tables: readonly Table[];
  readonly #store: PlanStore;
  readonly #scratch = new Scratch();
  /** Whether a decision of this plan is under way (a subscriber deciding meanwhile gets its own scratch). */
  #busy = false;

  constructor(rules: readonly RuleSpec[], store: PlanStore) {
    this.#specs = rules.slice();
    this.#tables = rules.map((r) => store.table(r));
    this.#store = store;
  }

  consume(ops: readonly StoreOp[], now?: number): StoreDecision {
    const sc = this.#busy ? new Scratch() : this.#scratch;
    sc.fit(ops.length);
    const tables = this.#tablesOf(ops, sc);
    if (sc !== this.#scratch) return this.#store.decide(ops, now, tables, sc);
    this.#busy = true;
    try {
      return this.#store.decide(ops, now, tables, sc);
    } finally {
      this.#busy = false;
    }
  }

  /**
   * Each op's table. When the ops are the prepared rules, in order and none left out (the
   * common case), the prepared tables as they are: copying them into the scratch cost a
   * stored pointer per op, with its write barrier.
   */
  #tablesOf(ops: readonly StoreOp[], sc: Scratch): readonly Table[] {
    const specs = this.#specs;
    const n = ops.length;
    const m = specs.length;
    let i = 0;
    if (n === m) while (i < n && (ops[i] as StoreOp).rule === specs[i]) i++;
    if (i === m) return this.#tables;
    // The ops come in the prepared order, some rules left out (a key absent): one pass.
    let j = 0;
    for (i = 0; i < n; i++) {
      const r = (ops[i] as StoreOp).rule;
      let k = j;
      while (k < m && !sameState(r, specs[k] as RuleSpec)) k++;
      if (k < m) {
        sc.tables[i] = this.#tables[k] as Table;
        j = k + 1;
      } else sc.tables[i] = this.#store.table(r);
    }
    return sc.tables;
  }
}
