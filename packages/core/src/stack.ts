/**
 * The stack decision, shared by every store that decides in JavaScript
 * (the Redis store's Lua mirrors it line for line).
 *
 * All-or-nothing: the request is admitted only if every rule admits it (dry-run rules
 * excepted), and if any rule rejects, no rule consumes anything. Rejecting rules may
 * still write: a new `blockFor` block, or the penalty of `countRejected`.
 */
import { algorithms, type State } from './algorithms/index.js';
import type { Outcome, RuleSpec, StoreOp } from './types.js';

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

/** Decides one rule of a stack. Pure. */
export function checkRule(entry: Entry | undefined, now: number, r: RuleSpec, cost: number): RuleVerdict {
  if (cost > r.maxCost) {
    return {
      outcome: { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, reason: 'cost_exceeds_limit' },
      write: undefined,
    };
  }
  const c = algorithms[r.algorithm].check(entry?.s, now, r, cost);
  const blockedUntil = entry?.b ?? 0;
  if (blockedUntil > now) {
    const wait = blockedUntil - now;
    return {
      outcome: {
        allowed: false,
        remaining: 0,
        resetMs: Math.max(c.resetMs, wait),
        retryAfterMs: Math.max(wait, c.allowed ? 0 : c.retryAfterMs),
        delayMs: 0,
        reason: 'blocked',
      },
      write: undefined,
    };
  }
  // The algorithm's fresh Check object doubles as the outcome (its `next` is not read
  // past this point), which saves a copy per rule on the hot path.
  const outcome: Outcome = c;
  if (c.allowed) return { outcome, write: c.next === undefined ? undefined : { s: c.next, b: 0 } };
  let write: Entry | undefined = c.next === undefined ? undefined : { s: c.next, b: 0 };
  if (c.next !== undefined) {
    // countRejected: the refusal itself is written, so the figures must describe the state
    // it leaves behind.
    const after = algorithms[r.algorithm].check(c.next, now, r, cost);
    outcome.remaining = Math.max(0, Math.min(c.remaining, after.remaining));
    outcome.resetMs = Math.max(c.resetMs, after.resetMs);
    outcome.retryAfterMs = after.retryAfterMs;
  }
  if (r.blockForMs > 0) {
    write = { s: c.next ?? entry?.s, b: now + r.blockForMs };
    outcome.retryAfterMs = Math.max(outcome.retryAfterMs, r.blockForMs);
    outcome.resetMs = Math.max(outcome.resetMs, r.blockForMs);
    outcome.remaining = 0;
  }
  return { outcome, write };
}

/** The absolute time after which an entry decides like no entry at all. */
export function entryExpiresAt(e: Entry, r: RuleSpec): number {
  const s = e.s === undefined ? 0 : algorithms[r.algorithm].expiresAt(e.s, r);
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
  const verdicts: RuleVerdict[] = new Array(ops.length);
  let allowed = true;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as StoreOp;
    const v = checkRule(entries[i], now, op.rule, op.cost);
    verdicts[i] = v;
    if (!v.outcome.allowed && !op.rule.dryRun) allowed = false;
  }
  const outcomes: Outcome[] = new Array(ops.length);
  const writes: (Entry | undefined)[] = new Array(ops.length);
  for (let i = 0; i < ops.length; i++) {
    const v = verdicts[i] as RuleVerdict;
    outcomes[i] = v.outcome;
    // An admitting rule consumes only when the whole stack is admitted; a rejecting
    // rule writes its block or penalty either way.
    writes[i] = v.outcome.allowed && !allowed ? undefined : v.write;
    if (!allowed) {
      v.outcome.delayMs = 0;
      // An admitting rule of a refused stack consumed nothing: report it untouched.
      if (v.outcome.allowed) untouched(v.outcome, entries[i]?.s, now, ops[i] as StoreOp);
    }
  }
  return { allowed, outcomes, writes };
}

/**
 * An admitting rule's outcome as if nothing had been consumed: `cost` back in `remaining`, and
 * the `resetMs` of the state as found (a check of cost 0), not of the state after `cost`.
 */
function untouched(o: Outcome, s: State | undefined, now: number, op: StoreOp): void {
  o.remaining += op.cost;
  o.resetMs = algorithms[op.rule.algorithm].check(s, now, op.rule, 0).resetMs;
}

/** The entry after giving back `cost` consumed at `at`. */
export function refundEntry(e: Entry, now: number, r: RuleSpec, cost: number, at: number): Entry | undefined {
  if (e.s === undefined) return e;
  const s = algorithms[r.algorithm].refund(e.s, now, r, cost, at);
  return s === undefined && e.b === 0 ? undefined : { s, b: e.b };
}

/**
 * The most a charge leaves in a state (a count, a debt in a token bucket's scaled units, a
 * leaky bucket's time ahead of now): far below the magnitude (1e16) past which the Redis
 * store reads a value as foreign and absent, so no pile of charges turns a debt into a fresh
 * budget. Each sliding-log entry (and sliding-buckets block) stays below `LOG_CHARGE_MAX`
 * for the same reason: a state holds many of them.
 */
export const CHARGE_MAX = 2 ** 50;
export const LOG_CHARGE_MAX = 2 ** 40;

/** Specs with `countRejected` forced on: a check then always says what consuming would leave. */
const forcedSpecs = new WeakMap<RuleSpec, RuleSpec>();

/**
 * The state after charging `units` at `now` without refusing: what an admitted request of
 * that cost would leave, whatever is left (a token bucket below zero, a count beyond the
 * limit, a leaky bucket's time further ahead): a debt that later requests wait out.
 */
export function chargeState(s: State | undefined, now: number, r: RuleSpec, units: number): State {
  if (r.algorithm === 'leaky-bucket') {
    const base = s === undefined ? now : Math.max(now, s[0] as number);
    return [Math.min(base + units * (r.windowMs / r.limit), now + CHARGE_MAX)];
  }
  let f = forcedSpecs.get(r);
  if (f === undefined) {
    f = { ...r, countRejected: true, blockForMs: 0 };
    forcedSpecs.set(r, f);
  }
  const next = (algorithms[r.algorithm].check(s, now, f, units).next as State).slice();
  switch (r.algorithm) {
    case 'token-bucket':
      next[1] = Math.max(next[1] as number, -CHARGE_MAX);
      break;
    case 'fixed-window':
      next[1] = Math.min(next[1] as number, CHARGE_MAX);
      break;
    case 'sliding-window':
      next[2] = Math.min(next[2] as number, CHARGE_MAX);
      break;
    case 'sliding-log':
    case 'sliding-buckets':
      next[next.length - 1] = Math.min(next[next.length - 1] as number, LOG_CHARGE_MAX);
      break;
  }
  return next;
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
