/**
 * `fixed-window`. State: `[windowStart, count]`.
 *
 * `align: 'clock'` windows cover `[k·W, (k+1)·W)`; `'first-request'` windows start at a
 * key's first admitted request. Calendar quotas use UTC days or months.
 * Known flaw, kept on purpose: up to 2·L can pass around a boundary.
 */
import type { RuleSpec } from '../types.js';
import { type Algorithm, admit, checkOf, type Kernel, refuse } from './types.js';

// The last clock-aligned window worked out. `t % W` on an epoch-sized double is a slow
// floating-point remainder, and consecutive decisions nearly always fall in one window.
let memoW = 0;
let memoStart = 0;

/**
 * `t - (t % W)`: the start of the clock-aligned window of length `W` containing `t`.
 * Exact: a remembered start is reused only for a `t` in `[start, start + W)`, where the
 * remainder gives that same start (only for `t >= 0`, where the start is `W·floor(t/W)`).
 */
export function alignedStart(t: number, W: number): number {
  if (W === memoW && t >= memoStart && t < memoStart + W) return memoStart;
  const start = t - (t % W);
  if (t >= 0) {
    memoW = W;
    memoStart = start;
  }
  return start;
}

/** Start of the UTC month that contains `t`. */
function monthStart(t: number): number {
  const d = new Date(t);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** End (exclusive) of the UTC month that starts at `start`. */
function monthEnd(start: number): number {
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** Start of the window that contains `t`. */
export function windowStart(t: number, r: RuleSpec): number {
  return r.calendar === 'month' ? monthStart(t) : alignedStart(t, r.windowMs);
}

/** End (exclusive) of the window that starts at `start`. */
export function windowEnd(start: number, r: RuleSpec): number {
  return r.calendar === 'month' ? monthEnd(start) : start + r.windowMs;
}

/** `check` of fixed-window on the state `[s[o], s[o + 1]]` (see `Kernel`). */
export const fixedWindowKernel: Kernel = (s, o, has, now, r, cost, v) => {
  const W = r.windowMs;
  let start: number;
  let count = 0;
  let end: number;
  if (r.align === 'first-request') {
    // A window opens at the first request at or after the previous window's end.
    if (has && now < (s[o] as number) + W) {
      start = s[o] as number;
      count = s[o + 1] as number;
    } else start = now;
    end = start + W;
  } else {
    // `undefined` first: a comparison of an unknown value with a string is a builtin call.
    const month = r.calendar !== undefined && r.calendar === 'month';
    start = month ? monthStart(now) : alignedStart(now, W);
    // A stored window later than now means time went backwards: stay in it.
    if (has && (s[o] as number) >= start) {
      start = s[o] as number;
      count = s[o + 1] as number;
    }
    end = month ? monthEnd(start) : start + W;
  }
  v.n0 = start;
  if (count + cost <= r.limit) {
    const used = count + cost;
    v.n1 = used;
    // Nothing counted (cost 0 in an empty window): no state, so no window is opened.
    admit(v, r.limit - used, used > 0 ? end - now : 0, 0, used > 0 ? end : 0);
    return;
  }
  v.n1 = count + cost;
  // countRejected: the refusal is written, so its figures describe the count it leaves.
  refuse(v, r.limit - (r.countRejected ? count + cost : count), end - now, end - now, r.countRejected);
};

export const fixedWindow: Algorithm = {
  check: checkOf(fixedWindowKernel, 2),

  refund(state, now, r, cost, at) {
    const start = state[0] as number;
    const end = r.align === 'first-request' ? start + r.windowMs : windowEnd(start, r);
    // A clock behind the stored window (it stepped back) was behind it at the decision too:
    // the request was counted in that window.
    const t = now < start ? start : at;
    if (t < start || t >= end || now >= end) return state;
    const left = Math.max(0, (state[1] as number) - cost);
    // Back to 0: no state, as before the request (an exact undo: a first-request window the
    // request opened is closed again, also when a Cluster slot refunds a reservation).
    return left > 0 ? [start, left] : undefined;
  },

  expiresAt(state, r) {
    // Nothing counted: no state (see the kernel's admission).
    if (state[1] === 0) return 0;
    const start = state[0] as number;
    return r.align === 'first-request' ? start + r.windowMs : windowEnd(start, r);
  },
};
