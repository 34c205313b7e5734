/**
 * Retry waits: full-jitter exponential backoff.
 *
 * Retry n (the first retry is n = 1) waits `random(0, min(cap, base · 2^(n-1)))` when the
 * server asked for nothing. When the server asked for a wait S (Retry-After, or a
 * RateLimit policy at r=0), the retry waits S plus that same jitter, so it never comes
 * before S yet clients refused together do not all return at the same instant.
 * `jitter: 'none'` drops the random part (waits exactly the cap-bounded exponential, or
 * exactly S): useful as a control, and what produces the synchronised waves full jitter
 * exists to avoid.
 */

export type Jitter = 'full' | 'none';

/** `min(cap, base · 2^(n-1))`, the exponential ceiling of retry n. */
export function backoffCeilingMs(n: number, baseMs: number, capMs: number): number {
  // 2^(n-1) overflows to Infinity for huge n; min() keeps the cap.
  return Math.min(capMs, baseMs * 2 ** (n - 1));
}

/** A random() result forced into [0, 1]; NaN counts as 1 (the longest, most polite wait). */
function unit(r: number): number {
  return r >= 0 ? Math.min(r, 1) : Number.isNaN(r) ? 1 : 0;
}

export interface RetryWaitInput {
  /** The retry number, 1 for the first retry. */
  n: number;
  /** What the server asked for, in ms (`undefined` when nothing usable). */
  serverWaitMs: number | undefined;
  jitter: Jitter;
  baseMs: number;
  capMs: number;
  random: () => number;
}

/** How long to wait before retry n, in whole milliseconds. */
export function retryWaitMs(i: RetryWaitInput): number {
  const ceiling = backoffCeilingMs(i.n, i.baseMs, i.capMs);
  if (i.serverWaitMs !== undefined) {
    return Math.ceil(i.serverWaitMs + (i.jitter === 'full' ? unit(i.random()) * ceiling : 0));
  }
  return Math.ceil(i.jitter === 'full' ? unit(i.random()) * ceiling : ceiling);
}
