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

  it('equals t - (t % W) up to 2^53 and for any whole or fractional window length', () => {
    const time = fc.oneof(
      fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
      fc.double({ min: 0, max: 2 ** 53, noNaN: true }),
      // Just before and at a multiple of W: where a rounded quotient is off by one.
      fc.tuple(fc.integer({ min: 1, max: 2 ** 40 }), fc.constantFrom(-1, 0, 1, -0.5)).map(([k, d]) => [k, d] as const),
    );
    const W = fc.oneof(fc.integer({ min: 1, max: 2 ** 31 }), fc.double({ min: 0.001, max: 1e9, noNaN: true }));
    fc.assert(
      fc.property(time, W, (t, w) => {
        const at = Array.isArray(t) ? (t[0] as number) * w + (t[1] as number) : (t as number);
        if (!(at >= 0 && at <= 2 ** 53)) return;
        expect(alignedStart(at, w)).toBe(at - (at % w));
      }),
      { numRuns: 20_000 },
    );
  });

  it('answers the window after a boundary, not the remembered one', () => {
    expect(alignedStart(1_700_000_059_999, 60_000)).toBe(1_700_000_040_000);
    expect(alignedStart(1_700_000_100_000, 60_000)).toBe(1_700_000_100_000);
    expect(alignedStart(1_700_000_099_999, 60_000)).toBe(1_700_000_040_000);
    expect(alignedStart(-5, 10)).toBe(-5 - (-5 % 10));
  });
});
