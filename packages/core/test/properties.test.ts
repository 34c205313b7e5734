/**
 * Property tests (fast-check) for the algorithm invariants of SPEC 1, 3 and 4, run through
 * the public limiter on a MemoryStore and a ManualClock:
 * - sliding-log never admits more than L in any interval of length W;
 * - sliding-buckets never admits more than L in any interval of length W - W/N;
 * - token bucket never admits more than B + r·T in any interval T;
 * - leaky meter (GCRA) and token bucket admit identical sequences (whole-ms T);
 * - no algorithm admits a request right after rejecting it with nothing changed;
 * - a rejected stack consumes nothing;
 * - retryAfterMs is exact for every algorithm.
 */
import { constant, createLimiter, type Decision, type Limiter, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

interface Req {
  n: number;
}
interface Arrival {
  gap: number;
  cost: number;
}
type RuleBody = Omit<Rule<Req>, 'name' | 'key'>;

const RUNS = 150;
const START = 1_700_000_000_000;

/** A rule configuration and the largest cost it can admit. */
const ruleArb: fc.Arbitrary<{ rule: RuleBody; maxCost: number; windowMs: number }> = fc
  .record({
    kind: fc.constantFrom('fixed', 'fixed-first', 'log', 'window', 'token', 'meter', 'queue', 'buckets'),
    limit: fc.integer({ min: 1, max: 12 }),
    windowMs: fc.integer({ min: 1, max: 3000 }),
    extra: fc.integer({ min: 1, max: 12 }),
    countRejected: fc.boolean(),
    blockFor: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })),
  })
  .map(({ kind, limit, windowMs, extra, countRejected, blockFor }) => {
    const base = blockFor > 0 ? { limit, window: windowMs, blockFor } : { limit, window: windowMs };
    const cr = countRejected ? { countRejected: true } : {};
    switch (kind) {
      case 'fixed':
        return { rule: { ...base, ...cr, algorithm: 'fixed-window' as const }, maxCost: limit, windowMs };
      case 'fixed-first':
        return { rule: { ...base, ...cr, algorithm: 'fixed-window' as const, align: 'first-request' as const }, maxCost: limit, windowMs };
      case 'log':
        return { rule: { ...base, ...cr, algorithm: 'sliding-log' as const }, maxCost: limit, windowMs };
      case 'window':
        return { rule: { ...base, ...cr, algorithm: 'sliding-window' as const }, maxCost: limit, windowMs };
      case 'token':
        return { rule: { ...base, ...cr, algorithm: 'token-bucket' as const, burst: extra }, maxCost: extra, windowMs };
      case 'meter':
        return { rule: { ...base, ...cr, algorithm: 'leaky-bucket' as const, burst: extra }, maxCost: extra, windowMs };
      case 'buckets': {
        // Blocks: the largest divisor of the window up to `extra`.
        let buckets = extra;
        while (windowMs % buckets !== 0) buckets--;
        return { rule: { ...base, ...cr, algorithm: 'sliding-buckets' as const, buckets }, maxCost: limit, windowMs };
      }
      default:
        return { rule: { ...base, algorithm: 'leaky-bucket' as const, mode: 'queue' as const, queue: extra }, maxCost: extra, windowMs };
    }
  });

/** Arrivals: gaps up to `maxGap` ms (often 0, so bursts happen) and costs 1..maxCost. */
function arrivalsArb(maxCost: number, maxGap: number): fc.Arbitrary<Arrival[]> {
  const gap = fc.oneof(
    fc.constant(0),
    fc.integer({ min: 0, max: Math.max(1, Math.floor(maxGap / 10)) }),
    fc.integer({ min: 0, max: maxGap }),
  );
  return fc.array(fc.record({ gap, cost: fc.integer({ min: 1, max: maxCost }) }), { minLength: 1, maxLength: 60 });
}

function setup(rules: Rule<Req>[]): { clock: ManualClock; store: MemoryStore; l: Limiter<Req> } {
  const clock = new ManualClock(START);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  return { clock, store, l: createLimiter<Req>({ rules, store, clock }) };
}

/** Runs arrivals through a one-rule limiter; returns each decision with its time. */
async function run(rule: RuleBody, arrivals: readonly Arrival[]): Promise<{ t: number; cost: number; d: Decision }[]> {
  const { clock, store, l } = setup([{ name: 'r', key: constant('k'), cost: (req) => req.n, ...rule }]);
  const out: { t: number; cost: number; d: Decision }[] = [];
  for (const a of arrivals) {
    clock.advance(a.gap);
    out.push({ t: clock.now(), cost: a.cost, d: await l.consume({ n: a.cost }) });
  }
  await store.close();
  return out;
}

describe('algorithm properties', () => {
  it('sliding-log never admits more than L in any interval of length W', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 10 }).chain((c) => arrivalsArb(c, 1500)),
        async (limit, windowMs, arrivals) => {
          const fitting = arrivals.map((a) => ({ gap: a.gap, cost: Math.min(a.cost, limit) }));
          const res = (await run({ algorithm: 'sliding-log', limit, window: windowMs }, fitting)).filter((x) => x.d.allowed);
          // The busiest interval of length W ends at an admission: (t - W, t].
          for (const x of res) {
            const inWindow = res.filter((y) => y.t > x.t - windowMs && y.t <= x.t).reduce((s, y) => s + y.cost, 0);
            expect(inWindow).toBeLessThanOrEqual(limit);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('sliding-buckets never admits more than L in any interval of length W - b (b = W / N)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 10 }).chain((c) => arrivalsArb(c, 1500)),
        async (limit, buckets, b, arrivals) => {
          const windowMs = buckets * b;
          const fitting = arrivals.map((a) => ({ gap: a.gap, cost: Math.min(a.cost, limit) }));
          const res = (await run({ algorithm: 'sliding-buckets', limit, window: windowMs, buckets }, fitting)).filter((x) => x.d.allowed);
          // The busiest closed interval of length W - b starts at an admission: [t, t + W - b].
          for (const x of res) {
            const inSpan = res.filter((y) => y.t >= x.t && y.t <= x.t + windowMs - b).reduce((s, y) => s + y.cost, 0);
            expect(inSpan).toBeLessThanOrEqual(limit);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('token bucket never admits more than B + r·T in any interval T', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 10 }).chain((c) => arrivalsArb(c, 800)),
        async (limit, windowMs, burst, arrivals) => {
          const fitting = arrivals.map((a) => ({ gap: a.gap, cost: Math.min(a.cost, burst) }));
          const res = (await run({ algorithm: 'token-bucket', limit, window: windowMs, burst }, fitting)).filter((x) => x.d.allowed);
          for (let i = 0; i < res.length; i++) {
            let sum = 0;
            for (let j = i; j < res.length; j++) {
              sum += (res[j] as (typeof res)[number]).cost;
              const T = (res[j] as (typeof res)[number]).t - (res[i] as (typeof res)[number]).t;
              // sum <= B + (L/W)·T, in integers
              expect(sum * windowMs).toBeLessThanOrEqual(burst * windowMs + limit * T);
            }
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('leaky meter and token bucket admit identical sequences (whole-ms emission interval)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 400 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 10 }).chain((c) => arrivalsArb(c, 1500)),
        fc.boolean(),
        async (limit, interval, burst, arrivals, countRejected) => {
          const window = limit * interval; // T = W / L is a whole number of ms
          const fitting = arrivals.map((a) => ({ gap: a.gap, cost: Math.min(a.cost, burst) }));
          // With countRejected too: a refusal adds its cost to the meter's level exactly as
          // it takes it from the bucket's tokens.
          const meter = await run({ algorithm: 'leaky-bucket', limit, window, burst, countRejected }, fitting);
          const bucket = await run({ algorithm: 'token-bucket', limit, window, burst, countRejected }, fitting);
          expect(meter.map((x) => x.d.allowed)).toEqual(bucket.map((x) => x.d.allowed));
          expect(meter.map((x) => x.d.retryAfterMs)).toEqual(bucket.map((x) => x.d.retryAfterMs));
          expect(meter.map((x) => x.d.rules[0]?.remaining)).toEqual(bucket.map((x) => x.d.rules[0]?.remaining));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('no algorithm admits a request right after rejecting the same request with nothing changed', async () => {
    await fc.assert(
      fc.asyncProperty(
        ruleArb.chain((c) => fc.tuple(fc.constant(c), arrivalsArb(c.maxCost, c.windowMs))),
        async ([c, arrivals]) => {
          const { clock, store, l } = setup([{ name: 'r', key: constant('k'), cost: (req) => req.n, ...c.rule }]);
          for (const a of arrivals) {
            clock.advance(a.gap);
            const d = await l.consume({ n: a.cost });
            if (!d.allowed) {
              expect((await l.peek({ n: a.cost })).allowed).toBe(false);
              expect((await l.consume({ n: a.cost })).allowed).toBe(false);
            }
          }
          await store.close();
        },
      ),
      { numRuns: RUNS * 2 },
    );
  });

  it('retryAfterMs is exact for every algorithm: rejected at now + retryAfterMs - 1, admitted at now + retryAfterMs', async () => {
    let verified = 0;
    await fc.assert(
      fc.asyncProperty(
        ruleArb.chain((c) => fc.tuple(fc.constant(c), arrivalsArb(c.maxCost, c.windowMs))),
        async ([c, arrivals]) => {
          const { clock, store, l } = setup([{ name: 'r', key: constant('k'), cost: (req) => req.n, ...c.rule }]);
          for (const a of arrivals) {
            clock.advance(a.gap);
            const now = clock.now();
            const d = await l.consume({ n: a.cost });
            if (d.allowed) continue;
            expect(d.retryAfterMs).toBeGreaterThan(0);
            expect(Number.isInteger(d.retryAfterMs)).toBe(true);
            clock.set(now + d.retryAfterMs - 1);
            expect((await l.peek({ n: a.cost })).allowed).toBe(false);
            clock.set(now + d.retryAfterMs);
            expect((await l.peek({ n: a.cost })).allowed).toBe(true);
            verified++;
          }
          await store.close();
        },
      ),
      { numRuns: RUNS * 2 },
    );
    expect(verified).toBeGreaterThan(RUNS);
  });

  it('a rejected stack consumes nothing in any rule', async () => {
    const stackArb = fc.array(ruleArb, { minLength: 2, maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(
        stackArb.chain((rules) =>
          fc.tuple(
            fc.constant(rules),
            fc.array(fc.boolean(), { minLength: rules.length, maxLength: rules.length }),
            arrivalsArb(Math.max(...rules.map((r) => r.maxCost)), 1500),
          ),
        ),
        async ([configs, shared, arrivals]) => {
          // No countRejected or blockFor here: their refusals write on purpose (SPEC 3, 3.7).
          const rules: Rule<Req>[] = configs.map((c, i) => {
            const { countRejected: _, blockFor: __, ...rule } = c.rule;
            return { name: `r${i}`, key: shared[i] ? constant('shared') : constant(`own${i}`), cost: (req) => req.n, ...rule };
          });
          const { clock, store, l } = setup(rules);
          for (const a of arrivals) {
            clock.advance(a.gap);
            const before = await l.peek({ n: 1 });
            const d = await l.consume({ n: a.cost });
            if (d.allowed) continue;
            const after = await l.peek({ n: 1 });
            expect(after.rules).toEqual(before.rules);
          }
          await store.close();
        },
      ),
      { numRuns: RUNS },
    );
  });
});
