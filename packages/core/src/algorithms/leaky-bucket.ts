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
 */
import type { RuleSpec } from '../types.js';
import { type Algorithm, admitted, refused, type State } from './types.js';

const interval = (r: RuleSpec): number => r.windowMs / r.limit;

/** Moves a whole-ms candidate `t` to the first instant at which `fits(t)` holds. */
function settle(candidate: number, fits: (t: number) => boolean): number {
  let t = candidate;
  while (!fits(t)) t++;
  while (fits(t - 1)) t--;
  return t;
}

/**
 * The backlog ahead of a request at `now`: how far the stored time lies in the future.
 * Computed first, as a small number: `stored - now` is exact for two epoch-sized times,
 * whereas `now + c·T - now` is not (at 1.7e12 ms one ulp is 0.00024 ms, enough to refuse
 * a fresh key's request of cost B when T is fractional).
 */
function backlog(state: number[] | undefined, now: number): number {
  return state === undefined ? 0 : Math.max(0, (state[0] as number) - now);
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

const meter: Algorithm = {
  check(state, now, r, cost) {
    const T = interval(r);
    const tol = r.burst * T;
    const ahead = backlog(state, now);
    const level = ahead + cost * T;
    if (level <= tol) {
      // resetMs from the time stored (rounded), so that at now + resetMs it has passed.
      const tat = now + level;
      return admitted(Math.floor((tol - level) / T), Math.ceil(tat - now), 0, [tat], Math.ceil(tat));
    }
    // The same test this function makes at a later whole ms t (state unchanged).
    const fits = (t: number) => backlog(state, t) + cost * T <= tol;
    const retry = settle(now + Math.ceil(ahead - (tol - cost * T)), fits) - now;
    return refused(Math.max(0, Math.floor((tol - ahead) / T)), Math.ceil(ahead), retry, r.countRejected ? [now + level] : undefined);
  },

  refund: giveBack,

  expiresAt(state) {
    return Math.ceil(state[0] as number);
  },
};

const queue: Algorithm = {
  check(state, now, r, cost) {
    const T = interval(r);
    const max = r.queue * T;
    const ahead = backlog(state, now);
    const wait = ahead + cost * T;
    if (wait <= max) {
      const departure = now + wait;
      return admitted(
        Math.max(0, Math.floor((max - wait) / T)),
        Math.ceil(departure - now),
        Math.ceil(wait),
        [departure],
        Math.ceil(departure),
      );
    }
    const fits = (t: number) => backlog(state, t) + cost * T <= max;
    const retry = settle(now + Math.ceil(ahead - (max - cost * T)), fits) - now;
    return refused(Math.max(0, Math.floor((max - ahead) / T)), Math.ceil(ahead), retry, undefined);
  },

  refund: giveBack,

  expiresAt(state) {
    return Math.ceil(state[0] as number);
  },
};

export const leakyBucket: Algorithm = {
  check: (state, now, r, cost) => (r.mode === 'queue' ? queue : meter).check(state, now, r, cost),
  refund: (state, now, r, cost, at) => (r.mode === 'queue' ? queue : meter).refund(state, now, r, cost, at),
  expiresAt: (state, r) => (r.mode === 'queue' ? queue : meter).expiresAt(state, r),
};
