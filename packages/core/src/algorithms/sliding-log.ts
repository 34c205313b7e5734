/**
 * `sliding-log`. State: `[t0, c0, t1, c1, ...]`, the time and cost of every
 * admitted request still in the window, oldest first (same-millisecond entries merged).
 *
 * The window at `now` is `(now - W, now]`: an entry exactly W old has expired. In any
 * interval of length W at most L units are admitted. Memory: up to L entries per key.
 */
import { append, refusal, takeAt } from './entries.js';
import { type Algorithm, admitted, type State } from './types.js';

export const slidingLog: Algorithm = {
  check(state, at, r, cost) {
    const W = r.windowMs;
    let first = 0;
    let sum = 0;
    // Time that goes backwards is treated as no time passing: decide at the newest entry's
    // time, but report resetMs and retryAfterMs from the caller's clock reading `at`.
    let now = at;
    if (state !== undefined && state.length > 0) {
      now = Math.max(at, state[state.length - 2] as number);
      while (first < state.length && (state[first] as number) <= now - W) first += 2;
      for (let i = first + 1; i < state.length; i += 2) sum += state[i] as number;
    }
    if (sum + cost <= r.limit) {
      const newest = cost > 0 ? now : sum > 0 ? ((state as State)[(state as State).length - 2] as number) : now - W;
      const next = append(state, first, now, cost);
      return admitted(r.limit - sum - cost, newest + W - at, 0, next, next.length > 0 ? (next[next.length - 2] as number) + W : 0);
    }
    // No state here is a charge beyond the limit (a settle's) on a key with nothing logged.
    return refusal(state ?? [], first, sum, now, at, r, cost);
  },

  refund(state, now, _r, cost, at) {
    // A clock behind the newest entry (it stepped back) was behind it at the decision too,
    // and no decision since has added a later entry: the request was merged into that entry
    // (time going backwards is no time passing), not recorded at `at`.
    const newest = state[state.length - 2] as number;
    return takeAt(state, now < newest && at < newest ? newest : at, cost);
  },

  expiresAt(state, r) {
    return state.length > 0 ? (state[state.length - 2] as number) + r.windowMs : 0;
  },
};
