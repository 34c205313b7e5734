/**
 * `leaky-bucket` (SPEC 3.5), in two readings.
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
import { type Algorithm, admitted, refused } from './types.js';

const interval = (r: RuleSpec): number => r.windowMs / r.limit;

/** Moves a whole-ms candidate `t` to the first instant at which `fits(t)` holds. */
function settle(candidate: number, fits: (t: number) => boolean): number {
  let t = candidate;
  while (!fits(t)) t++;
  while (fits(t - 1)) t--;
  return t;
}

const meter: Algorithm = {
  check(state, now, r, cost) {
    const T = interval(r);
    const tol = r.burst * T;
    const tat = state === undefined ? now : Math.max(state[0] as number, now);
    const next = tat + cost * T;
    if (next - now <= tol) {
      return admitted(Math.floor((tol - (next - now)) / T), Math.ceil(next - now), 0, [next]);
    }
    const fits = (t: number) => tat + cost * T - t <= tol;
    const retry = settle(Math.ceil(tat + cost * T - tol), fits) - now;
    return refused(Math.max(0, Math.floor((tol - (tat - now)) / T)), Math.ceil(tat - now), retry, r.countRejected ? [next] : undefined);
  },

  refund(state, now, r, cost) {
    const tat = Math.max(now, (state[0] as number) - cost * interval(r));
    return [tat];
  },

  expiresAt(state) {
    return Math.ceil(state[0] as number);
  },
};

const queue: Algorithm = {
  check(state, now, r, cost) {
    const T = interval(r);
    const max = r.queue * T;
    const last = state === undefined ? now : Math.max(state[0] as number, now);
    const departure = last + cost * T;
    if (departure - now <= max) {
      const delay = Math.ceil(departure - now);
      return admitted(Math.max(0, Math.floor((max - (departure - now)) / T)), delay, delay, [departure]);
    }
    const fits = (t: number) => last + cost * T - t <= max;
    const retry = settle(Math.ceil(last + cost * T - max), fits) - now;
    return refused(Math.max(0, Math.floor((max - (last - now)) / T)), Math.ceil(last - now), retry, undefined);
  },

  refund(state, now, r, cost) {
    return [Math.max(now, (state[0] as number) - cost * interval(r))];
  },

  expiresAt(state) {
    return Math.ceil(state[0] as number);
  },
};

export const leakyBucket: Algorithm = {
  check: (state, now, r, cost) => (r.mode === 'queue' ? queue : meter).check(state, now, r, cost),
  refund: (state, now, r, cost, at) => (r.mode === 'queue' ? queue : meter).refund(state, now, r, cost, at),
  expiresAt: (state, r) => (r.mode === 'queue' ? queue : meter).expiresAt(state, r),
};
