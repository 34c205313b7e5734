/**
 * States that are lists of `[t0, c0, t1, c1, ...]`, a time and a count per entry, oldest
 * first: a sliding log's requests (by millisecond) and sliding buckets' blocks (by start).
 * An entry at `t` leaves the window at `t + W`.
 */
import type { RuleSpec } from '../types.js';
import { type Check, refused, type State } from './types.js';

/**
 * `[t0, c0, t1, c1, ...]` (a log's entries, or blocks) with `cost` taken from the entry at
 * `t` (dropped when emptied; undefined when none is left); as it was when there is none.
 */
export function takeAt(state: State, t: number, cost: number): State | undefined {
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
}

/**
 * Live entries from `first` on, plus `(now, cost)` merged into a tail at `now` (a
 * same-millisecond entry; for sliding buckets, the same block).
 */
export function append(state: State | undefined, first: number, now: number, cost: number): State {
  const next = state === undefined ? [] : state.slice(first);
  if (cost <= 0) return next;
  if (next.length > 0 && next[next.length - 2] === now) next[next.length - 1] = (next[next.length - 1] as number) + cost;
  else next.push(now, cost);
  return next;
}

/**
 * The refusal of `cost` by the live entries of `s` (from `first`, summing `sum`): retry when
 * the oldest entries whose departure frees enough have left, reset when the newest has,
 * both from the caller's clock reading `at`. A counted refusal (countRejected) adds `cost`
 * at `t`, and its figures describe the entries it leaves too. `cost <= L`, so some entry is
 * live.
 */
export function refusal(s: State, first: number, sum: number, t: number, at: number, r: RuleSpec, cost: number): Check {
  const W = r.windowMs;
  // No entry: a charge beyond the limit (a settle's) on a key with nothing logged.
  const newest = s.length > 0 ? (s[s.length - 2] as number) : t - W;
  if (!r.countRejected) return refused(r.limit - sum, newest + W - at, retryAt(s, first, sum, t, r, cost) - at, undefined);
  const next = append(s, first, t, cost);
  let left = 0;
  for (let i = 1; i < next.length; i += 2) left += next[i] as number;
  // A refusal is at t or later, so every entry it leaves is live then.
  const last = next.length > 0 ? (next[next.length - 2] as number) : t - W;
  return refused(Math.min(r.limit - sum, r.limit - left), Math.max(newest, last) + W - at, retryAt(next, 0, left, t, r, cost) - at, next);
}

/** When the oldest entries of `s` (from `first`, summing `sum`) whose departure frees room for `cost` have left. */
function retryAt(s: State, first: number, sum: number, t: number, r: RuleSpec, cost: number): number {
  let freed = 0;
  for (let i = first; i < s.length; i += 2) {
    freed += s[i + 1] as number;
    if (sum - freed + cost <= r.limit) return (s[i] as number) + r.windowMs;
  }
  return t;
}

/**
 * `[t0, c0, t1, c1, ...]` (a log's entries, or blocks) less `units`, newest first: the usage
 * that would stay longest. Changes `next`; undefined when nothing is left.
 */
export function takeNewest(next: State, units: number): State | undefined {
  let left = units;
  while (left > 0 && next.length > 0) {
    const c = next[next.length - 1] as number;
    if (c > left) {
      next[next.length - 1] = c - left;
      left = 0;
    } else {
      left -= c;
      next.length -= 2;
    }
  }
  return next.length > 0 ? next : undefined;
}
