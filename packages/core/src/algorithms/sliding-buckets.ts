/**
 * `sliding-buckets`: the window of W ms cut into N clock-aligned blocks of `b = W / N` ms
 * (block j covers `[j·b, (j+1)·b)`), one counter each. State: `[s0, c0, s1, c1, ...]`, the
 * start and admitted cost of every non-empty block still in the window, oldest first: at
 * most N pairs, and as many as the key had busy blocks (a quiet key keeps one or two).
 *
 * At `now` (block start k) the count is the sum of the blocks starting after `k - W` (the
 * last N blocks); a request is admitted iff count + cost <= L, its cost added to block k.
 * In any interval of length W - b at most L units are admitted; N = 1 is a clock-aligned
 * fixed window, and a large N approaches the sliding log.
 */
import type { RuleSpec } from '../types.js';
import { append, refusal, takeAt } from './entries.js';
import { type Algorithm, admitted, type State } from './types.js';

/** The most blocks a window may be cut into (the state's counters per key). */
export const MAX_BUCKETS = 1000;

/** The start of the block of width `b` containing `t` (`b·floor(t / b)`, exact: `%` is). */
export function blockStart(t: number, b: number): number {
  const s = t - (t % b);
  return s > t ? s - b : s;
}

/** The index of the oldest block of `s` still in the window that ends with block `k`. */
function firstLive(s: State, k: number, W: number): number {
  let first = 0;
  while (first < s.length && (s[first] as number) <= k - W) first += 2;
  return first;
}

/**
 * The block a decision at `at` counts in: its own, or the newest block of `s` when that is
 * later (time that went backwards is treated as no time passing).
 */
function blockAt(s: State | undefined, at: number, b: number): number {
  const k = blockStart(at, b);
  return s !== undefined && s.length > 0 ? Math.max(k, s[s.length - 2] as number) : k;
}

export const slidingBuckets: Algorithm = {
  check(state, at, r, cost) {
    const W = r.windowMs;
    const k = blockAt(state, at, W / r.buckets);
    let first = 0;
    let sum = 0;
    if (state !== undefined) {
      first = firstLive(state, k, W);
      for (let i = first + 1; i < state.length; i += 2) sum += state[i] as number;
    }
    if (sum + cost <= r.limit) {
      const next = append(state, first, k, cost);
      // resetMs: until the newest non-empty block has left the window (none: 0).
      const x = next.length > 0 ? (next[next.length - 2] as number) + W : 0;
      return admitted(r.limit - sum - cost, x > 0 ? x - at : 0, 0, next, x);
    }
    // Refused: block s_i leaves the window when the block s_i + W begins.
    return refusal(state ?? [], first, sum, k, at, r, cost);
  },

  refund(state, now, r, cost, at) {
    const b = r.windowMs / r.buckets;
    // A clock behind the newest block (it stepped back) was behind it at the decision too,
    // and no decision since has added a later block: the request was counted in that block.
    const newest = state[state.length - 2] as number;
    const atBlock = blockStart(at, b);
    return takeAt(state, blockStart(now, b) < newest && atBlock < newest ? newest : atBlock, cost);
  },

  expiresAt(state, r) {
    return state.length > 0 ? (state[state.length - 2] as number) + r.windowMs : 0;
  },
};

/** The blocks of `state` still in the window at `at` (as a check reads them), for `reward` (key-ops.ts). */
export function liveBlocks(state: State, at: number, r: RuleSpec): State {
  const W = r.windowMs;
  return state.slice(firstLive(state, blockAt(state, at, W / r.buckets), W));
}
