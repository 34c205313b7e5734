/**
 * alignedStart (packages/core/src/algorithms/fixed-window.ts) remembers the last window it
 * worked out; whatever the order of calls, it answers exactly `t - (t % W)`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { alignedStart } from '../src/algorithms/fixed-window.js';

describe('alignedStart', () => {
  it('equals t - (t % W) for any sequence of times and window lengths, negative and fractional times too', () => {
    const time = fc.oneof(
      fc.integer({ min: -1e13, max: 2e12 }),
      fc.double({ min: -1e6, max: 2e12, noNaN: true, noDefaultInfinity: true }),
      fc.integer({ min: 1_700_000_000_000, max: 1_700_000_100_000 }),
    );
    const W = fc.constantFrom(1, 7, 1000, 60_000, 3_600_000, 86_400_000);
    fc.assert(
      fc.property(fc.array(fc.tuple(time, W), { maxLength: 60 }), (calls) => {
        for (const [t, w] of calls) expect(alignedStart(t, w)).toBe(t - (t % w));
      }),
      { numRuns: 2000 },
    );
  });

  it('answers the window after a boundary, not the remembered one', () => {
    expect(alignedStart(1_700_000_059_999, 60_000)).toBe(1_700_000_040_000);
    expect(alignedStart(1_700_000_100_000, 60_000)).toBe(1_700_000_100_000);
    expect(alignedStart(1_700_000_099_999, 60_000)).toBe(1_700_000_040_000);
    expect(alignedStart(-5, 10)).toBe(-5 - (-5 % 10));
  });
});
