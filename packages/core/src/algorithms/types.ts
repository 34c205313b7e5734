/**
 * The algorithm interface: pure functions of (state, now, params).
 *
 * States are small arrays of numbers so that the Redis store's Lua scripts can
 * mirror them field for field. `check` never mutates its input; it returns the
 * state the store should write if the request is committed.
 *
 * Inside, each fixed-width algorithm is one `Kernel`: the same decision, reading the state
 * where it lies (a row of MemoryStore's slab) and writing its verdict into a `Verdict` the
 * caller reuses, so a decision allocates nothing per rule. The public `check` is that
 * kernel run on a copy of its state (`checkOf`), so both are one implementation.
 */
import type { Outcome, RejectReason, RuleSpec } from '../types.js';

export type State = number[];

export interface Check extends Outcome {
  /**
   * The state after consuming `cost`: written when the stack is admitted, or on a
   * rejection when the rule counts rejected requests. `undefined` when there is
   * nothing to write.
   */
  next: State | undefined;
  /**
   * On an admission, when `next` stops mattering: `expiresAt(next)`, which the check knows
   * for nothing (a store writing `next` needs it for its expiry).
   */
  x: number;
}

export interface Algorithm {
  /** Decides `cost` at `now`. `cost <= r.maxCost` is guaranteed by the caller. */
  check(state: State | undefined, now: number, r: RuleSpec, cost: number): Check;
  /** The state after giving back `cost` consumed at time `at`. */
  refund(state: State, now: number, r: RuleSpec, cost: number, at: number): State | undefined;
  /** The time from which `state` decides exactly like no state at all (for expiry and TTLs). */
  expiresAt(state: State, r: RuleSpec): number;
}

const NO_ROWS = new Float64Array(0);

/**
 * A `Check` without its objects: the outcome's figures and the next state's numbers
 * (`n0`..`n2`, as many as the algorithm's state has), overwritten by every kernel call.
 * `row`, `held`, `block`, `page` and `off` are the deciding store's notes on where the state was read.
 */
export class Verdict implements Outcome {
  allowed = false;
  remaining = 0;
  resetMs = 0;
  retryAfterMs = 0;
  delayMs = 0;
  reason: RejectReason | undefined = undefined;
  /** As `Check.x`: on an admission, the next state's `expiresAt`. */
  x = 0;
  /** Whether there is a next state (`Check.next !== undefined`). */
  write = false;
  n0 = 0;
  n1 = 0;
  n2 = 0;
  /** The store's row of the state read (-1: none), whether it was held, its block deadline. */
  row = -1;
  held = false;
  block = 0;
  /** Where that row lies (when `row >= 0`): its page of the store's slab and its offset there. */
  page: Float64Array = NO_ROWS;
  off = 0;
  /** The next state of an algorithm without a kernel (sliding-log), as `Check.next`. */
  next: State | undefined = undefined;
}

/**
 * Decides `cost` at `now` on the state `s[o]`, `s[o + 1]`, ... (`has`: there is one; else
 * `s` is not read) and writes the verdict into `v`: the same figures and next state as
 * `check`. `cost <= r.maxCost` is guaranteed by the caller.
 */
export type Kernel = (s: Float64Array, o: number, has: boolean, now: number, r: RuleSpec, cost: number, v: Verdict) => void;

/** An admission into `v` (the kernel sets the next state's numbers). */
export function admit(v: Verdict, remaining: number, resetMs: number, delayMs: number, x: number): void {
  v.allowed = true;
  v.remaining = remaining;
  v.resetMs = resetMs;
  v.retryAfterMs = 0;
  v.delayMs = delayMs;
  v.reason = undefined;
  v.x = x;
  v.write = true;
}

/** A refusal into `v`; `write`: the refusal is counted (the kernel sets the next state's numbers). */
export function refuse(v: Verdict, remaining: number, resetMs: number, retryAfterMs: number, write: boolean): void {
  v.allowed = false;
  // Never below 0, as in `refused`: a count may exceed a limit lowered since.
  v.remaining = Math.max(0, remaining);
  v.resetMs = resetMs;
  v.retryAfterMs = retryAfterMs;
  v.delayMs = 0;
  v.reason = 'limit';
  v.x = 0;
  v.write = write;
}

/** The public `check` of a kernel whose states have `width` numbers. */
export function checkOf(kernel: Kernel, width: number): Algorithm['check'] {
  const s = new Float64Array(width);
  const v = new Verdict();
  return (state, now, r, cost) => {
    const has = state !== undefined;
    if (has) for (let i = 0; i < width; i++) s[i] = state[i] as number;
    kernel(s, 0, has, now, r, cost, v);
    const next = !v.write ? undefined : width === 1 ? [v.n0] : width === 2 ? [v.n0, v.n1] : [v.n0, v.n1, v.n2];
    return v.allowed
      ? admitted(v.remaining, v.resetMs, v.delayMs, next as State, v.x)
      : refused(v.remaining, v.resetMs, v.retryAfterMs, next);
  };
}

export function admitted(remaining: number, resetMs: number, delayMs: number, next: State, x: number): Check {
  return { allowed: true, remaining, resetMs, retryAfterMs: 0, delayMs, reason: undefined, next, x };
}

export function refused(remaining: number, resetMs: number, retryAfterMs: number, next: State | undefined): Check {
  // Never below 0: a fixed window's count may exceed a limit lowered since (a limit per
  // request, or an update). Here rather than in the algorithm, off its admitting path.
  return { allowed: false, remaining: Math.max(0, remaining), resetMs, retryAfterMs, delayMs: 0, reason: 'limit', next, x: 0 };
}
