/**
 * `sliding-window` counter. State: `[start, prev, cur]` where `start` is the
 * clock-aligned start of the current window k, `prev` the count of window k-1 and `cur`
 * the count of window k.
 *
 * estimate = prev · (1 - elapsed/W) + cur, and a request is admitted iff
 * floor(estimate) + cost <= L. Everything is computed in integers scaled by W:
 * floor(estimate) + cost <= L  ⟺  prev·(W - e) + cur·W < (L - cost + 1)·W.
 */

import type { RuleSpec } from '../types.js';
import { alignedStart } from './fixed-window.js';
import { type Algorithm, admit, checkOf, type Kernel, refuse, type State } from './types.js';

/** `check` of the sliding-window counter on the state `[s[o], s[o + 1], s[o + 2]]` (see `Kernel`). */
export const slidingWindowKernel: Kernel = (s, o, has, at, r, cost, v) => {
  const W = r.windowMs;
  let prev = 0;
  let cur = 0;
  let now = at;
  let start = alignedStart(now, W);
  if (has) {
    const s0 = s[o] as number;
    if (s0 >= start) {
      // Same window, or time went backwards: treated as no time passing (decide at the
      // stored window's start at the earliest), while resetMs and retryAfterMs are
      // reported from the caller's clock reading `at`.
      start = s0;
      now = Math.max(now, s0);
      prev = s[o + 1] as number;
      cur = s[o + 2] as number;
    } else if (s0 === start - W) prev = s[o + 2] as number;
  }
  const e = now - start;
  const scaled = prev * (W - e) + cur * W;
  const floorEstimate = Math.floor(scaled / W);
  v.n0 = start;
  v.n1 = prev;
  if (scaled < (r.limit - cost + 1) * W) {
    const after = cur + cost;
    // resetMs: until the full quota is back, i.e. until a request of cost L would pass:
    // floor(estimate) = 0, room 1 (not until the state is forgotten, a window later).
    const full = prev * (W - e) + after * W < W ? at : retryAt(start, prev, after, W, 1);
    v.n2 = after;
    admit(v, Math.max(0, r.limit - floorEstimate - cost), full - at, 0, start + (after > 0 ? 2 : 1) * W);
    return;
  }
  // Refused, so the estimate is at least 1 now (cost <= L): the full quota is ahead.
  const counted = cur + cost;
  v.n2 = counted;
  const remaining = r.limit - floorEstimate;
  const full = retryAt(start, prev, cur, W, 1) - at;
  if (!r.countRejected) {
    refuse(v, remaining, full, retryAt(start, prev, cur, W, r.limit - cost + 1) - at, false);
    return;
  }
  // countRejected: the refusal is written, so its figures describe the state it leaves too.
  const left = Math.floor((prev * (W - e) + counted * W) / W);
  refuse(
    v,
    Math.min(remaining, r.limit - left),
    Math.max(full, retryAt(start, prev, counted, W, 1) - at),
    retryAt(start, prev, counted, W, r.limit - cost + 1) - at,
    true,
  );
};

export const slidingWindow: Algorithm = {
  check: checkOf(slidingWindowKernel, 3),

  refund(state, now, r, cost, at) {
    const W = r.windowMs;
    const start = state[0] as number;
    // A clock behind the stored window (it stepped back) was behind it at the decision too,
    // and no decision since has moved the window: the request was counted in it.
    const atStart = now < start ? start : at - (at % W);
    let next: State;
    if (atStart === start) next = [start, state[1] as number, Math.max(0, (state[2] as number) - cost)];
    else if (atStart === start - W) next = [start, Math.max(0, (state[1] as number) - cost), state[2] as number];
    else return state;
    // Both counts back to 0: no state, as before the request (an exact undo, which a
    // stack's reserve-then-refund across Cluster slots relies on).
    return next[1] === 0 && next[2] === 0 ? undefined : next;
  },

  expiresAt(state, r) {
    return (state[0] as number) + ((state[2] as number) > 0 ? 2 : 1) * r.windowMs;
  },
};

/**
 * The earliest time at which prev·(W - e) + cur·W < room·W holds, room = L - cost + 1 >= 1.
 * Within window k the estimate decays with prev; from window k+1 on, prev' = cur.
 */
function retryAt(start: number, prev: number, cur: number, W: number, room: number): number {
  const a = room - cur;
  if (a > 0 && prev > 0) {
    // need prev·e > W·(prev - a)
    const e = Math.floor((W * (prev - a)) / prev) + 1;
    if (e < W) return start + e;
  }
  // Window k+1: need cur·(W - e) < room·W, i.e. cur·e > W·(cur - room).
  if (cur < room) return start + W;
  return start + W + Math.floor((W * (cur - room)) / cur) + 1;
}

/**
 * A sliding window: the estimate `prev·(W - e)/W + cur` falls by `units` (floored, as
 * decisions read it), from the current window's count first, then from the previous
 * window's, whose units weigh `(W - e)/W` each: the fewest of them that make the floor fall
 * far enough. The state is moved to the current window first (as a check would read it).
 */
export function rewardSlidingWindow(state: State, at: number, r: RuleSpec, units: number): State {
  const W = r.windowMs;
  let start = at - (at % W);
  let now = at;
  let prev = 0;
  let cur = 0;
  const s0 = state[0] as number;
  if (s0 >= start) {
    start = s0;
    now = Math.max(now, s0);
    prev = state[1] as number;
    cur = state[2] as number;
  } else if (s0 === start - W) prev = state[2] as number;
  else return state;
  const fromCur = Math.min(cur, units);
  cur -= fromCur;
  const left = units - fromCur;
  if (left > 0 && prev > 0) {
    const e = now - start;
    const scaled = prev * (W - e) + cur * W;
    const target = Math.floor(scaled / W) - left;
    if (target < cur) prev = 0;
    else {
      // The fewest d with prev·(W - e) - d·(W - e) + cur·W < (target + 1)·W.
      const d = Math.floor((scaled - (target + 1) * W) / (W - e)) + 1;
      prev = Math.max(0, prev - d);
    }
  }
  return [start, prev, cur];
}
