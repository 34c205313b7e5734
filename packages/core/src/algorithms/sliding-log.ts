/**
 * `sliding-log`. State: `[t0, c0, t1, c1, ...]`, the time and cost of every
 * admitted request still in the window, oldest first (same-millisecond entries merged).
 *
 * The window at `now` is `(now - W, now]`: an entry exactly W old has expired. In any
 * interval of length W at most L units are admitted. Memory: up to L entries per key.
 */
import { type Algorithm, admitted, refused, type State } from './types.js';

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
    // The earliest time enough entries have expired for `cost` to fit. No state here is a
    // charge beyond the limit (a settle's) on a key with nothing logged.
    const s = state ?? [];
    let freed = 0;
    let retryAt = now;
    for (let i = first; i < s.length; i += 2) {
      freed += s[i + 1] as number;
      if (sum - freed + cost <= r.limit) {
        retryAt = (s[i] as number) + W;
        break;
      }
    }
    const newest = s.length > 0 ? (s[s.length - 2] as number) : now - W;
    return refused(Math.max(0, r.limit - sum), newest + W - at, retryAt - at, r.countRejected ? append(s, first, now, cost) : undefined);
  },

  refund(state, now, _r, cost, at) {
    // A clock behind the newest entry (it stepped back) was behind it at the decision too,
    // and no decision since has added a later entry: the request was merged into that entry
    // (time going backwards is no time passing), not recorded at `at`.
    const newest = state[state.length - 2] as number;
    const t = now < newest && at < newest ? newest : at;
    for (let i = state.length - 2; i >= 0; i -= 2) {
      if (state[i] === t) {
        const next = state.slice();
        const left = (state[i + 1] as number) - cost;
        if (left > 0) next[i + 1] = left;
        else next.splice(i, 2);
        return next.length > 0 ? next : undefined;
      }
      if ((state[i] as number) < t) break;
    }
    return state;
  },

  expiresAt(state, r) {
    return state.length > 0 ? (state[state.length - 2] as number) + r.windowMs : 0;
  },
};

/** Live entries from `first` on, plus `(now, cost)` merged into a same-millisecond tail. */
function append(state: State | undefined, first: number, now: number, cost: number): State {
  const next = state === undefined ? [] : state.slice(first);
  if (cost <= 0) return next;
  if (next.length > 0 && next[next.length - 2] === now) next[next.length - 1] = (next[next.length - 1] as number) + cost;
  else next.push(now, cost);
  return next;
}
