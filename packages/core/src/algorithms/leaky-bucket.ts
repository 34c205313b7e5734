/**
 * `leaky-bucket`, in two readings.
 *
 * `meter` (GCRA). State: `[tat]`, the theoretical arrival time. The emission interval
 * is T = W/L ms per unit and the tolerance B·T; a request of cost c is admitted iff
 * max(tat, now) + c·T - now <= B·T. It admits exactly what a token bucket with the same
 * B and r admits (property-tested for whole-millisecond T).
 *
 * `queue` (a shaper). State: `[lastDeparture]`. departure = max(now, last) + c·T; the
 * request is admitted and delayed until its departure iff departure - now <= Q·T.
 *
 * With a fractional T the arithmetic is floating point, so the retry time is computed
 * in closed form and then checked against the decision itself (`settle`): whatever the
 * rounding, a request is still refused at retryAfterMs - 1 and admitted at retryAfterMs.
 * Every exact figure is a whole multiple of 1/L ms (whole-ms times, T = W/L), so a level
 * within half of that above the line is rounding (`slackOf`): without it a burst of B at
 * 7/s admitted only B - 1, as a token bucket never does.
 */
import type { RuleSpec } from '../types.js';
import { type Algorithm, admit, checkOf, type Kernel, refuse, type State } from './types.js';

const interval = (r: RuleSpec): number => r.windowMs / r.limit;

/** How far above the line a float level may lie and still be on it: half of 1/L ms. */
const slackOf = (r: RuleSpec): number => 0.5 / r.limit;

/** Whole ms up to `x` (never negative), rounding error forgiven. */
function msUp(x: number, slack: number): number {
  return Math.max(0, Math.ceil(x - slack));
}

/** Whole units of T in `room` ms (never negative), rounding error forgiven. */
function unitsIn(room: number, T: number, slack: number): number {
  return Math.max(0, Math.floor((room + slack) / T));
}

/**
 * Moves a whole-ms candidate `t` to the first instant at which a request weighing `need`
 * fits under `room` (the stored time `s0`, when `has`, left unchanged).
 */
function settle(candidate: number, has: boolean, s0: number, need: number, room: number): number {
  let t = candidate;
  while (!fits(t, has, s0, need, room)) t++;
  while (fits(t - 1, has, s0, need, room)) t--;
  return t;
}

/** The test a check makes at a later whole ms `t`, the state unchanged. */
function fits(t: number, has: boolean, s0: number, need: number, room: number): boolean {
  return backlog(has, s0, t) + need <= room;
}

/**
 * The backlog ahead of a request at `now`: how far the stored time lies in the future.
 * Computed first, as a small number: `stored - now` is exact for two epoch-sized times,
 * whereas `now + c·T - now` is not (at 1.7e12 ms one ulp is 0.00024 ms, enough to refuse
 * a fresh key's request of cost B when T is fractional).
 */
function backlog(has: boolean, s0: number, now: number): number {
  return has ? Math.max(0, s0 - now) : 0;
}

/**
 * Both readings' refund: the stored time moves back by what the request still weighs, its
 * c·T less the time that has drained since it was admitted (a clock reading before `at`
 * counts as no time passing), never more. What has drained was already given back by time:
 * crediting it again is how five requests refunded after the bucket refilled and drained
 * again let five more through at one instant.
 */
function giveBack(state: State, now: number, r: RuleSpec, cost: number, at: number): State {
  const weight = Math.max(0, cost * interval(r) - Math.max(0, now - at));
  return [Math.max(now, (state[0] as number) - weight)];
}

/** `check` of both readings on the state `[s[o]]` (see `Kernel`). */
export const leakyBucketKernel: Kernel = (s, o, has, now, r, cost, v) => {
  const T = interval(r);
  const slack = slackOf(r);
  const s0 = has ? (s[o] as number) : 0;
  const ahead = backlog(has, s0, now);
  const need = cost * T;
  if (r.mode === 'queue') {
    const max = r.queue * T;
    const wait = ahead + need;
    if (wait <= max + slack) {
      const departure = now + wait;
      v.n0 = departure;
      admit(v, unitsIn(max - wait, T, slack), msUp(wait, slack), msUp(wait, slack), Math.ceil(departure));
      return;
    }
    const retry = settle(now + Math.ceil(ahead - (max - need)), has, s0, need, max + slack) - now;
    refuse(v, unitsIn(max - ahead, T, slack), msUp(ahead, slack), retry, false);
    return;
  }
  // meter
  const tol = r.burst * T;
  const level = ahead + need;
  v.n0 = now + level;
  if (level <= tol + slack) {
    // resetMs: at now + resetMs the time stored has passed (to within the slack).
    admit(v, unitsIn(tol - level, T, slack), msUp(level, slack), 0, Math.ceil(now + level));
    return;
  }
  if (!r.countRejected) {
    const retry = settle(now + Math.ceil(ahead - (tol - need)), has, s0, need, tol + slack) - now;
    refuse(v, unitsIn(tol - ahead, T, slack), msUp(ahead, slack), retry, false);
    return;
  }
  // countRejected: the refusal is written, so its figures describe the time it leaves
  // stored (its backlog as a later check reads it) too.
  const left = backlog(true, v.n0, now);
  const retry = settle(now + Math.ceil(left - (tol - need)), true, v.n0, need, tol + slack) - now;
  refuse(
    v,
    Math.min(unitsIn(tol - ahead, T, slack), unitsIn(tol - left, T, slack)),
    Math.max(msUp(ahead, slack), msUp(left, slack)),
    retry,
    true,
  );
};

const expiresAt = (state: State): number => Math.ceil(state[0] as number);

export const leakyBucket: Algorithm = {
  check: checkOf(leakyBucketKernel, 1),
  refund: giveBack,
  expiresAt,
};
