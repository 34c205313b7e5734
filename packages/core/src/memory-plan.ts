/**
 * A MemoryStore's prepared stack (`Store.prepare`): each rule's table, found once. What the
 * store keeps for a limiter lives here and nowhere else: the tables (which live as long as
 * the store) and the objects one decision works in. No state, row or key outlives the
 * decision that found it, so no decision can read or write through another's.
 */
import { Found, type Table } from './memory-table.js';
import { RuleJudgement } from './stack.js';
import type { RuleSpec, StackPlan, StoreDecision, StoreOp } from './types.js';

/** The objects one decision works in: per op, where its state was found and its verdict. */
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

/** How a plan reaches its store: a rule's table, and a decision on tables found. */
export interface PlanStore {
  table(r: RuleSpec): Table;
  decide(ops: readonly StoreOp[], now: number | undefined, scratch: Scratch): StoreDecision;
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
    const n = ops.length;
    sc.fit(n);
    const specs = this.#specs;
    const m = specs.length;
    // The ops come in the prepared order, some rules left out (a key absent): one pass.
    let j = 0;
    for (let i = 0; i < n; i++) {
      const r = (ops[i] as StoreOp).rule;
      let k = j;
      while (k < m && !sameState(r, specs[k] as RuleSpec)) k++;
      if (k < m) {
        sc.tables[i] = this.#tables[k] as Table;
        j = k + 1;
      } else sc.tables[i] = this.#store.table(r);
    }
    if (sc !== this.#scratch) return this.#store.decide(ops, now, sc);
    this.#busy = true;
    try {
      return this.#store.decide(ops, now, sc);
    } finally {
      this.#busy = false;
    }
  }
}
