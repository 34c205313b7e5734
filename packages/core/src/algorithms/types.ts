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
import type { AlgorithmName, Outcome, RejectReason, RuleSpec } from '../types.js';

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

/**
 * A `Check` without its objects: the outcome's figures and the next state's numbers
 * (`n0`..`n2`, as many as the algorithm's state has), overwritten by every kernel call.
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

/** The options only some algorithms take (`AlgorithmDef.options`). */
export type AlgorithmOption = 'align' | 'mode' | 'burst' | 'queue' | 'quota' | 'buckets';

/** The names of algorithms' readings (`AlgorithmDef.readings`). */
export type ReadingName = 'leaky-meter' | 'leaky-queue';

/** A reading of an algorithm: the options it sets. */
export interface Reading {
  readonly mode?: 'meter' | 'queue';
}

/**
 * One algorithm, everything the engine and the stores need to know of it: every
 * per-algorithm table (storage kind, wire code, slab width, option checks, CLI choices) is
 * derived from these entries (registry.ts).
 */
export interface AlgorithmDef extends Algorithm {
  readonly name: AlgorithmName;
  /** One letter: the state kind in a rule's storage id and the algorithm on the Redis wire. */
  readonly code: string;
  /** Numbers per state; 0 for a state of variable width (a list, kept as an array). */
  readonly width: number;
  /** `check` on the state where it lies (fixed-width states only). */
  readonly kernel: Kernel | undefined;
  /** The largest cost a request may have: the limit, or a bucket's burst (a leaky queue's places). */
  maxCost(r: Pick<RuleSpec, 'limit' | 'burst' | 'queue' | 'mode'>): number;
  /** Whether it admits by delaying (a leaky queue, a shaper): its refusals never count and it is never leased. */
  delays(r: Pick<RuleSpec, 'mode'>): boolean;
  /** What the Redis wire's Q field carries for it: a leaky queue's places, sliding buckets' blocks per window. */
  wireQ(r: Pick<RuleSpec, 'queue' | 'buckets'>): number;
  /**
   * Whether an admission's `resetMs` is already the time until a request of cost 1 passes
   * again (a fixed window's end), so a RateLimit `t` at r = 0 needs no extra peek.
   */
  readonly resetIsNextAdmission: boolean;
  /**
   * The end of the counting period that units counted at `at` fall in (a fixed window, a
   * sliding window's current window, a block; `resetMs`: the admission's), Infinity when the
   * algorithm has none: leased units are used within it, so none crosses into the next.
   */
  periodEnd(r: RuleSpec, at: number, resetMs: number): number;
  /**
   * Whether its expiry follows values a rule may change (limit, burst), not only its state: a
   * token bucket read under a lower burst is full now, yet its tokens matter again if the
   * burst rises before it refills. Stores keep such a state until the expiry it was written
   * for and the current rule's have both passed.
   */
  readonly expiryMoves: boolean;
  /**
   * The period of the clock-aligned boundaries at which its whole count starts over (a
   * clock-aligned fixed window: W), which a timeline draws; undefined when there are none.
   */
  boundaries(r: Pick<RuleSpec, 'align' | 'calendar' | 'windowMs'>): number | undefined;
  /** Decides in integers scaled by the window: limit (and burst) × window must stay below 2^52. */
  readonly scaled: boolean;
  /**
   * Its state is a time at the rule's rate (a leaky bucket's backlog): re-read at another
   * limit with a tolerance that moved too, it could hand back budget, so a limit may change
   * only while burst and queue follow it.
   */
  readonly timeState: boolean;
  /** Options only some algorithms take, this one among them. */
  readonly options: readonly AlgorithmOption[];
  /** Whether `countRejected` applies (a leaky queue refuses without counting). */
  countsRefusals(r: Pick<RuleSpec, 'mode'>): boolean;
  /**
   * Named readings of it, each a setting of its options (the leaky bucket as a meter or a
   * queue), which tools such as the CLI offer beside its name.
   */
  readonly readings: Readonly<Partial<Record<ReadingName, Reading>>>;
  /** The state after charging `units` at `now` without refusing (a debt; see `chargeState`). */
  charge(s: State | undefined, now: number, r: RuleSpec, units: number): State;
  /** The state after giving back up to `units` of what is used now (never beyond full). */
  reward(s: State, now: number, r: RuleSpec, units: number): State | undefined;
  /** Other names people give it (or one of its readings), with what tollgate calls that. */
  readonly spellings: Readonly<Record<string, string>>;
}

/**
 * The most a charge leaves in a state (a count, a debt in a token bucket's scaled units, a
 * leaky bucket's time ahead of now): far below the magnitude (1e16) past which the Redis
 * store reads a value as foreign and absent, so no pile of charges turns a debt into a fresh
 * budget. Each sliding-log entry stays below `LOG_CHARGE_MAX` for the same reason.
 */
export const CHARGE_MAX = 2 ** 50;
export const LOG_CHARGE_MAX = 2 ** 40;

/** Specs with `countRejected` forced on: a check then always says what consuming would leave. */
const forcedSpecs = new WeakMap<RuleSpec, RuleSpec>();

/**
 * A `charge` by the algorithm's own check with refusals counted: the state an admitted
 * request of `units` would leave whatever is left, its number at `at` (from the end when
 * negative) kept within `max` in the direction `sign` says.
 */
export function chargeByCheck(check: Algorithm['check'], at: number, sign: 1 | -1, max: number): AlgorithmDef['charge'] {
  return (s, now, r, units) => {
    let f = forcedSpecs.get(r);
    if (f === undefined) {
      f = { ...r, countRejected: true, blockForMs: 0 };
      forcedSpecs.set(r, f);
    }
    const next = (check(s, now, f, units).next as State).slice();
    const i = at < 0 ? next.length + at : at;
    next[i] = sign > 0 ? Math.min(next[i] as number, max) : Math.max(next[i] as number, -max);
    return next;
  };
}
