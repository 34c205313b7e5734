/**
 * The stack decision, one path for every store that decides in JavaScript (the Redis
 * store's Lua mirrors it).
 *
 * All-or-nothing: the request is admitted only if every rule admits it (dry-run rules
 * excepted), and if any rule rejects, no rule consumes anything. Rejecting rules may
 * still write: a new `blockFor` block, or the penalty of `countRejected`.
 *
 * A store hands each rule's state where it lies (a `Site`: a slab row, or an array) to
 * `decideSites`, which runs each rule's kernel once and leaves in each `Verdict` what the
 * store writes; `checkRule` and `decideStack` are the same path on plain entries.
 */
import { type AlgorithmDef, registry, type State, uncounted, Verdict } from './algorithms/index.js';
import type { Outcome, RuleSpec, StoreOp } from './types.js';

export { CHARGE_MAX, LOG_CHARGE_MAX } from './algorithms/index.js';

/** What a store keeps per (rule, key): the algorithm's state and a block deadline. */
export interface Entry {
  s: State | undefined;
  /** Blocked until this time (ms); 0 when not blocked. */
  b: number;
}

export interface RuleVerdict {
  outcome: Outcome;
  /** The entry to write if the verdict is committed, or undefined for no write. */
  write: Entry | undefined;
}

const NO_STATE = new Float64Array(0);

/**
 * Where one rule's state lies for a decision: a fixed-width state at `s[o]`, `s[o + 1]`, ...
 * (`has`: there is one), a variable-width one in `log`, and the key's block deadline.
 */
export class Site {
  s: Float64Array = NO_STATE;
  o = 0;
  has = false;
  log: State | undefined = undefined;
  block = 0;
}

/** A rule's verdict with what it writes when committed: `write` (the next state) and `block` (a deadline, 0: none). */
export class RuleJudgement extends Verdict {
  /** A new block deadline to write (blockFor), 0 when none. */
  block = 0;
}

/** The decision of `def` at `site`, into `v`. */
function run(def: AlgorithmDef, site: Site, now: number, r: RuleSpec, cost: number, v: Verdict): void {
  const kernel = def.kernel;
  if (kernel !== undefined) kernel(site.s, site.o, site.has, now, r, cost, v);
  else runCheck(def, site, now, r, cost, v);
}

/** `run` for an algorithm without a kernel (a state of variable width): its `check`, copied into `v`. */
function runCheck(def: AlgorithmDef, site: Site, now: number, r: RuleSpec, cost: number, v: Verdict): void {
  const c = def.check(site.log, now, r, cost);
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

/** The next state a verdict holds, as an array (for an expiry, or a store of arrays). */
export function nextState(def: AlgorithmDef, v: Verdict): State | undefined {
  if (!v.write) return undefined;
  if (def.kernel === undefined) return v.next;
  return def.width === 1 ? [v.n0] : def.width === 2 ? [v.n0, v.n1] : [v.n0, v.n1, v.n2];
}

/**
 * Decides one rule at `site` into `v`: the largest cost, the algorithm, a block, and on a
 * refusal its block (`blockFor`). The algorithm runs once: a `countRejected` refusal's
 * figures, which describe the state it leaves, are its own. The rare branches are
 * functions of their own so that this one stays small enough to be inlined.
 */
export function judge(site: Site, now: number, r: RuleSpec, cost: number, v: RuleJudgement): void {
  v.block = 0;
  const def = registry[r.algorithm];
  if (cost > r.maxCost) refuseCost(v);
  else if (site.block > now) judgeBlocked(def, site, now, r, cost, v);
  else {
    run(def, site, now, r, cost, v);
    if (!v.allowed && r.blockForMs > 0) startBlock(now, r, v);
  }
}

/** A cost above the rule's largest: refused whatever the state, nothing written. */
function refuseCost(v: RuleJudgement): void {
  v.allowed = false;
  v.remaining = 0;
  v.resetMs = 0;
  v.retryAfterMs = 0;
  v.delayMs = 0;
  v.reason = 'cost_exceeds_limit';
  v.write = false;
}

/** A blocked key: nothing is written, so the figures are the state's as it is. */
function judgeBlocked(def: AlgorithmDef, site: Site, now: number, r: RuleSpec, cost: number, v: RuleJudgement): void {
  run(def, site, now, uncounted(r), cost, v);
  const wait = site.block - now;
  v.retryAfterMs = Math.max(wait, v.allowed ? 0 : v.retryAfterMs);
  v.resetMs = Math.max(v.resetMs, wait);
  v.allowed = false;
  v.remaining = 0;
  v.delayMs = 0;
  v.reason = 'blocked';
  v.write = false;
}

/** A refusal of a rule with `blockFor`: the block it starts, in its figures too. */
function startBlock(now: number, r: RuleSpec, v: RuleJudgement): void {
  v.block = now + r.blockForMs;
  v.retryAfterMs = Math.max(v.retryAfterMs, r.blockForMs);
  v.resetMs = Math.max(v.resetMs, r.blockForMs);
  v.remaining = 0;
}

/**
 * Decides a stack whose states lie at `sites` (one per op) into `verdicts`, nothing
 * written: each rule once, then, when a rule refuses, each admitting rule reported
 * untouched (its cost back in `remaining`, the `resetMs` of the state as found). Returns
 * whether the stack is admitted; the store then writes what the verdicts say.
 */
export function decideSites(ops: readonly StoreOp[], sites: readonly Site[], now: number, verdicts: readonly RuleJudgement[]): boolean {
  const n = ops.length;
  let allowed = true;
  for (let i = 0; i < n; i++) {
    const op = ops[i] as StoreOp;
    const v = verdicts[i] as RuleJudgement;
    judge(sites[i] as Site, now, op.rule, op.cost, v);
    if (!v.allowed && !op.rule.dryRun) allowed = false;
  }
  if (!allowed) {
    for (let i = 0; i < n; i++) {
      const v = verdicts[i] as RuleJudgement;
      v.delayMs = 0;
      if (!v.allowed) continue;
      const op = ops[i] as StoreOp;
      const remaining = v.remaining + op.cost;
      // A cost-0 check admits wherever the cost itself was admitted: v stays an admission.
      run(registry[op.rule.algorithm], sites[i] as Site, now, op.rule, 0, v);
      v.remaining = remaining;
      v.delayMs = 0;
    }
  }
  return allowed;
}

/** Whether a committed verdict writes its rule's entry (else a refusal leaves it, an admission of a refused stack too). */
export function writes(v: RuleJudgement, stackAllowed: boolean): boolean {
  return v.allowed ? stackAllowed : v.write || v.block > 0;
}

/** A verdict as an outcome of its own (the verdict is scratch, reused). */
export function outcomeOf(v: Outcome): Outcome {
  return {
    allowed: v.allowed,
    remaining: v.remaining,
    resetMs: v.resetMs,
    retryAfterMs: v.retryAfterMs,
    delayMs: v.delayMs,
    reason: v.reason,
  };
}

/** A site for a plain entry (its state copied into `buf` when the algorithm has a kernel). */
export function siteOf(e: Entry | undefined, r: RuleSpec, site: Site, buf: Float64Array): Site {
  const s = e?.s;
  site.block = e?.b ?? 0;
  site.has = s !== undefined;
  site.log = s;
  site.s = buf;
  site.o = 0;
  if (s !== undefined && registry[r.algorithm].kernel !== undefined) for (let i = 0; i < s.length && i < 3; i++) buf[i] = s[i] as number;
  return site;
}

/** The entry a verdict writes over `e` when committed (see `writes`). */
function entryAfter(def: AlgorithmDef, v: RuleJudgement, e: Entry | undefined): Entry {
  const s = v.write ? nextState(def, v) : e?.s;
  return { s, b: v.allowed ? 0 : v.block };
}

/** Decides one rule of a stack on a plain entry. Pure. */
export function checkRule(entry: Entry | undefined, now: number, r: RuleSpec, cost: number): RuleVerdict {
  const v = new RuleJudgement();
  judge(siteOf(entry, r, new Site(), new Float64Array(3)), now, r, cost, v);
  return { outcome: outcomeOf(v), write: v.write || v.block > 0 ? entryAfter(registry[r.algorithm], v, entry) : undefined };
}

/** The absolute time after which an entry decides like no entry at all. */
export function entryExpiresAt(e: Entry, r: RuleSpec): number {
  const s = e.s === undefined ? 0 : registry[r.algorithm].expiresAt(e.s, r);
  return Math.max(s, e.b);
}

/**
 * Decides a stack given each op's current entry; returns the outcomes and, per op, the
 * entry to write (`undefined`: leave it).
 */
export function decideStack(
  ops: readonly StoreOp[],
  entries: readonly (Entry | undefined)[],
  now: number,
): { allowed: boolean; outcomes: Outcome[]; writes: (Entry | undefined)[] } {
  const n = ops.length;
  const sites: Site[] = [];
  const verdicts: RuleJudgement[] = [];
  for (let i = 0; i < n; i++) {
    sites.push(siteOf(entries[i], (ops[i] as StoreOp).rule, new Site(), new Float64Array(3)));
    verdicts.push(new RuleJudgement());
  }
  const allowed = decideSites(ops, sites, now, verdicts);
  const outcomes: Outcome[] = new Array(n);
  const out: (Entry | undefined)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const v = verdicts[i] as RuleJudgement;
    const r = (ops[i] as StoreOp).rule;
    outcomes[i] = outcomeOf(v);
    out[i] = writes(v, allowed) ? entryAfter(registry[r.algorithm], v, entries[i]) : undefined;
  }
  return { allowed, outcomes, writes: out };
}

/** The entry after giving back `cost` consumed at `at`. */
export function refundEntry(e: Entry, now: number, r: RuleSpec, cost: number, at: number): Entry | undefined {
  if (e.s === undefined) return e;
  const s = registry[r.algorithm].refund(e.s, now, r, cost, at);
  return s === undefined && e.b === 0 ? undefined : { s, b: e.b };
}

/**
 * The state after charging `units` at `now` without refusing: what an admitted request of
 * that cost would leave, whatever is left (a token bucket below zero, a count beyond the
 * limit, a leaky bucket's time further ahead): a debt that later requests wait out.
 */
export function chargeState(s: State | undefined, now: number, r: RuleSpec, units: number): State {
  return registry[r.algorithm].charge(s, now, r, units);
}

/**
 * The entry after settling a reservation: `delta` is the actual cost less the estimate.
 * Below zero, the difference is given back as a refund of a decision made at `at` (never
 * more than the reservation still weighs); above zero it is charged now (`chargeState`).
 */
export function settleEntry(e: Entry | undefined, now: number, r: RuleSpec, delta: number, at: number): Entry | undefined {
  if (delta < 0) return e === undefined ? undefined : refundEntry(e, now, r, -delta, at);
  if (delta === 0) return e;
  return { s: chargeState(e?.s, now, r, delta), b: e?.b ?? 0 };
}
