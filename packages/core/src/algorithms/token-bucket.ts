/**
 * `token-bucket`. State: `[last, scaled]` where `scaled = tokens · W`.
 *
 * Refill is r = L/W tokens per ms, so in scaled units a bucket gains exactly L per ms:
 * every quantity stays an integer and `retryAfterMs = ceil((cost·W - scaled) / L)` is
 * exact. Capacity B = `burst` (default L). A new key starts full; an idle bucket never
 * exceeds B, so in any interval T at most B + r·T units pass.
 */
import type { RuleSpec } from '../types.js';
import { type Algorithm, admit, checkOf, type Kernel, refuse, type State } from './types.js';

function level(state: State | undefined, now: number, r: RuleSpec): { now: number; scaled: number } {
  const cap = r.burst * r.windowMs;
  if (state === undefined) return { now, scaled: cap };
  const last = state[0] as number;
  // min: a bucket fuller than a burst lowered since holds only the new burst.
  if (now <= last) return { now: last, scaled: Math.min(state[1] as number, cap) };
  const gained = r.limit * (now - last);
  const scaled = state[1] as number;
  return { now, scaled: gained >= cap - scaled ? cap : scaled + gained };
}

/** `check` of the token bucket on the state `[s[o], s[o + 1]]` (see `Kernel`). */
export const tokenBucketKernel: Kernel = (s, o, has, at, r, cost, v) => {
  const W = r.windowMs;
  const cap = r.burst * W;
  // The level at `now` (as `level` below, without its object).
  let now = at;
  let scaled = cap;
  if (has) {
    const last = s[o] as number;
    const stored = s[o + 1] as number;
    if (at <= last) {
      // min: a bucket fuller than a burst lowered since holds only the new burst.
      now = last;
      scaled = Math.min(stored, cap);
    } else {
      const gained = r.limit * (at - last);
      scaled = gained >= cap - stored ? cap : stored + gained;
    }
  }
  const need = cost * W;
  // After the clock stepped back, refill resumes only at `now` (the stored time), which
  // lies `now - at` ahead of the caller's reading: every figure includes that wait.
  const ahead = now - at;
  v.n0 = now;
  if (scaled >= need) {
    const left = scaled - need;
    // resetMs: until the bucket is full again (0 when it still is: a cost-0 request).
    const refill = Math.ceil((cap - left) / r.limit);
    v.n1 = left;
    admit(v, Math.floor(left / W), left >= cap ? 0 : refill + ahead, 0, now + refill);
    return;
  }
  // countRejected: the refusal is written (a debt), so its figures describe the level it leaves.
  const level = r.countRejected ? scaled - need : scaled;
  v.n1 = scaled - need;
  refuse(
    v,
    Math.floor(level / W),
    Math.ceil((cap - level) / r.limit) + ahead,
    Math.ceil((need - level) / r.limit) + ahead,
    r.countRejected,
  );
};

export const tokenBucket: Algorithm = {
  check: checkOf(tokenBucketKernel, 2),

  refund(state, now, r, cost, at) {
    const cur = level(state, now, r);
    const W = r.windowMs;
    // A refund gives back what the request still weighs: its cost less what the bucket has
    // refilled since it was admitted (L scaled units per ms), never more; refilled tokens
    // were already given back by time. Measured from `at`, the decision's clock reading,
    // which is never after the time the request was taken at, so the weight is never
    // overstated; except when the clock is behind the stored time (it stepped back): no
    // decision since moved that time, so it is the request's own, and nothing has refilled.
    const elapsed = now < (state[0] as number) ? 0 : Math.max(0, now - at);
    const weight = Math.max(0, cost * W - r.limit * elapsed);
    return [cur.now, Math.min(r.burst * W, cur.scaled + weight)];
  },

  expiresAt(state, r) {
    // Never before the bucket's own time (a bucket fuller than a burst lowered since).
    return (state[0] as number) + Math.max(0, Math.ceil((r.burst * r.windowMs - (state[1] as number)) / r.limit));
  },
};
