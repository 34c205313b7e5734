/**
 * The algorithm interface: pure functions of (state, now, params).
 *
 * States are small arrays of numbers so that the Redis store's Lua scripts can
 * mirror them field for field. `check` never mutates its input; it returns the
 * state the store should write if the request is committed.
 */
import type { Outcome, RuleSpec } from '../types.js';

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

export function admitted(remaining: number, resetMs: number, delayMs: number, next: State, x: number): Check {
  return { allowed: true, remaining, resetMs, retryAfterMs: 0, delayMs, reason: undefined, next, x };
}

export function refused(remaining: number, resetMs: number, retryAfterMs: number, next: State | undefined): Check {
  // Never below 0: a fixed window's count may exceed a limit lowered since (a limit per
  // request, or an update). Here rather than in the algorithm, off its admitting path.
  return { allowed: false, remaining: Math.max(0, remaining), resetMs, retryAfterMs, delayMs: 0, reason: 'limit', next, x: 0 };
}
