/**
 * Full-jitter backoff (SPEC 10): retry n waits random(0, min(cap, base · 2^(n-1))); a
 * server-requested wait S is a floor, with the same jitter on top.
 */
import { backoffCeilingMs, retryWaitMs } from '@tollgate/client';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

describe('retryWaitMs', () => {
  it('the ceiling doubles from base and stops at cap (defaults 500 ms / 10 s)', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 60, 5000].map((n) => backoffCeilingMs(n, 500, 10_000))).toEqual([
      500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000,
    ]);
  });

  it('property: full jitter stays in [0, ceiling], scales with random, and none waits the ceiling', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 120_000 }),
        fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
        (n, baseMs, capMs, r) => {
          const ceiling = backoffCeilingMs(n, baseMs, capMs);
          const full = retryWaitMs({ n, serverWaitMs: undefined, jitter: 'full', baseMs, capMs, random: () => r });
          const none = retryWaitMs({ n, serverWaitMs: undefined, jitter: 'none', baseMs, capMs, random: () => r });
          return full >= 0 && full <= Math.ceil(ceiling) && full === Math.ceil(r * ceiling) && none === Math.ceil(ceiling);
        },
      ),
    );
  });

  it('property: a server wait is a floor, jitter goes on top of it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 600_000 }),
        fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
        (n, s, r) => {
          const w = retryWaitMs({ n, serverWaitMs: s, jitter: 'full', baseMs: 500, capMs: 10_000, random: () => r });
          const none = retryWaitMs({ n, serverWaitMs: s, jitter: 'none', baseMs: 500, capMs: 10_000, random: () => r });
          return w >= s && w <= s + backoffCeilingMs(n, 500, 10_000) && none === s;
        },
      ),
    );
  });

  it('a random() outside [0, 1] is clamped; NaN takes the longest wait', () => {
    const w = (r: number) => retryWaitMs({ n: 1, serverWaitMs: undefined, jitter: 'full', baseMs: 500, capMs: 10_000, random: () => r });
    expect([w(-3), w(7), w(Number.NaN)]).toEqual([0, 500, 500]);
  });
});
