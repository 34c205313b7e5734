import { type Arrival, busiest, generateArrivals, parsePattern, policyFromFlags, type RequestRecord, simulate } from '@tollgate/cli';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const arrivals = (...patterns: string[]) => generateArrivals(patterns.map(parsePattern), { limit: 10, windowMs: 1000 });

/** Independent check of the busiest interval: for every admitted departure d, count departures in [d, d + w). */
function bruteMax(records: readonly RequestRecord[], w: number): number {
  const d = records.filter((r) => r.departure !== null).map((r) => r.departure as number);
  return Math.max(0, ...d.map((s) => d.filter((t) => t >= s && t < s + w).length));
}

describe('simulate: numbers from the real core', () => {
  it('fixed window lets 2·L through in one second on the boundary attack', async () => {
    const policy = policyFromFlags('fixed-window', { rate: '10/s' });
    const { records, summary } = await simulate(policy, arrivals('boundary'));
    expect(records.map((r) => r.arrival)).toEqual([
      900, 910, 920, 930, 940, 950, 960, 970, 980, 990, 1000, 1010, 1020, 1030, 1040, 1050, 1060, 1070, 1080, 1090,
    ]);
    expect(summary.admitted).toBe(20);
    expect(summary.busiest).toEqual({ count: 20, units: 20, from: 900 });
    expect(bruteMax(records, 1000)).toBe(20);
  });

  it('replays a reserve/settle trace: an actual cost above the estimate leaves a debt the next request waits out', async () => {
    // A token bucket of 10 a second: 4 reserved, 25 used, so 15 owed; the next request of 4
    // needs 19 tokens, 1.9 s; at 1900 ms it passes.
    const policy = policyFromFlags('token-bucket', { rate: '10/s' });
    const trace: Arrival[] = [
      { t: 0, key: 'a', cost: 4, actual: 25 },
      { t: 1899, key: 'a', cost: 4 },
      { t: 1900, key: 'a', cost: 4, actual: 1 },
      { t: 1900, key: 'a', cost: 3 },
    ];
    const { records } = await simulate(policy, trace);
    expect(records.map((r) => r.decision)).toEqual(['admitted', 'rejected', 'admitted', 'admitted']);
    expect(records[1]?.retryAfterMs).toBe(1);
  });

  it('sliding log on the same boundary attack admits only L in any second', async () => {
    const { summary, records } = await simulate(policyFromFlags('sliding-log', { rate: '10/s' }), arrivals('boundary'));
    expect(summary.admitted).toBe(10);
    expect(summary.busiest.count).toBe(10);
    expect(records.slice(10).every((r) => r.decision === 'rejected' && r.rules[0] === 'sliding-log')).toBe(true);
  });

  it('sliding log never exceeds L in any interval of length W (random arrivals)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 50, max: 2000 }),
        fc.array(fc.integer({ min: 0, max: 6000 }), { minLength: 1, maxLength: 80 }),
        async (limit, windowMs, times) => {
          const sorted = [...times].sort((a, b) => a - b);
          const input: Arrival[] = sorted.map((t) => ({ t, key: 'k', cost: 1 }));
          const { records, summary } = await simulate(
            policyFromFlags('sliding-log', { limit: String(limit), window: String(windowMs) }),
            input,
          );
          expect(summary.busiest.count).toBeLessThanOrEqual(limit);
          expect(bruteMax(records, windowMs)).toBeLessThanOrEqual(limit);
          expect(bruteMax(records, windowMs)).toBe(summary.busiest.count);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('token bucket: a burst of B, then the refill rate', async () => {
    const policy = policyFromFlags('token-bucket', { rate: '10/s', burst: '5' });
    const { records } = await simulate(policy, arrivals('burst 20 at 0', 'rate 20/s for 1s from 1s'));
    const admittedAt = records.filter((r) => r.decision === 'admitted').map((r) => r.arrival);
    // 5 at once, then nothing until a token refills (one per 100 ms). By 1 s the bucket is
    // full again; 20 arrivals 50 ms apart over [1 s, 1.95 s] get B + r·0.95 s = 14.5 → 14.
    expect(admittedAt.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
    expect(records[5]?.decision).toBe('rejected');
    expect(records[5]?.retryAfterMs).toBe(100);
    expect(admittedAt.filter((t) => t >= 1000)).toEqual([
      1000, 1050, 1100, 1150, 1200, 1250, 1300, 1350, 1400, 1500, 1600, 1700, 1800, 1900,
    ]);
    const { summary } = await simulate(policy, arrivals('rate 50/s for 3s'));
    // In any interval T at most B + r·T pass (SPEC 3.4): 5 + 10 in one second.
    expect(summary.busiest.count).toBeLessThanOrEqual(15);
    expect(summary.busiest.count).toBeGreaterThanOrEqual(14);
  });

  it('leaky queue: departures spaced by T, the SPEC 3.5 example', async () => {
    const policy = policyFromFlags('leaky-queue', { rate: '2/s', queue: '6' });
    const { records, summary } = await simulate(policy, arrivals('burst 9 at 0'));
    expect(records.map((r) => r.departure)).toEqual([500, 1000, 1500, 2000, 2500, 3000, null, null, null]);
    expect(records.map((r) => r.decision)).toEqual([
      'delayed',
      'delayed',
      'delayed',
      'delayed',
      'delayed',
      'delayed',
      'rejected',
      'rejected',
      'rejected',
    ]);
    expect(summary).toMatchObject({ admitted: 6, delayed: 6, rejected: 3, worstWaitMs: 3000 });
  });

  it('leaky queue: never two departures closer than T under a heavy burst', async () => {
    const { records, summary } = await simulate(policyFromFlags('leaky-queue', { rate: '10/s', queue: '5' }), arrivals('burst 80 over 2s'));
    const d = records.filter((r) => r.departure !== null).map((r) => r.departure as number);
    for (let i = 1; i < d.length; i++) expect((d[i] as number) - (d[i - 1] as number)).toBeGreaterThanOrEqual(100);
    expect(summary.worstWaitMs).toBeLessThanOrEqual(500);
    expect(summary.busiest.count).toBe(10);
  });

  it('stacks: a global rule over per-client rules rejects by name', async () => {
    const policy = {
      name: 'stack',
      rules: [
        {
          name: 'client',
          rate: '5/s' as const,
          algorithm: 'fixed-window' as const,
          key: (a: Arrival) => a.key,
          cost: (a: Arrival) => a.cost,
        },
        { name: 'all', rate: '8/s' as const, algorithm: 'fixed-window' as const, key: () => 'all', cost: (a: Arrival) => a.cost },
      ],
    };
    const { records } = await simulate(policy, arrivals('burst 12 at 0 keys 2'));
    expect(records.filter((r) => r.decision === 'admitted')).toHaveLength(8);
    expect(records[8]?.rules).toEqual(['all']);
    // client-1 has had 4 (1,3,5,7); its 5th is admitted by "client" but the stack is full.
    expect(records.slice(8).every((r) => r.decision === 'rejected')).toBe(true);
  });

  it('busiest counts a half-open interval, as the algorithms do', () => {
    const rec = (i: number, departure: number): RequestRecord => ({
      i,
      arrival: departure,
      key: 'k',
      cost: 1,
      decision: 'admitted',
      delayMs: 0,
      departure,
      rules: [],
      retryAfterMs: 0,
    });
    expect(busiest([rec(0, 0), rec(1, 1000)], 1000).count).toBe(1);
    expect(busiest([rec(0, 0), rec(1, 999)], 1000)).toEqual({ count: 2, units: 2, from: 0 });
  });
});
