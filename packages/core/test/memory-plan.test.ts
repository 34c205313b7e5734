/**
 * A MemoryStore's prepared stacks (`Store.prepare`): a plan holds only its rules' tables, so
 * limiters sharing a store never read or write through each other's plans, whatever they
 * interleave; the limiter prepares once, and again after `update`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AlgorithmName,
  createLimiter,
  ManualClock,
  MemoryStore,
  type Rule,
  type RuleSpec,
  type StoreDecision,
  type StoreOp,
} from '../src/index.js';

type Req = { k: string; cost?: number };

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket', 'sliding-buckets'];

/**
 * Two stacks naming their rules alike: same names and keys, other algorithms, one group
 * shared; key 'z' leaves each stack's first rule out (its ops then start at the second).
 */
function stacks(a: AlgorithmName, b: AlgorithmName): [Rule<Req>[], Rule<Req>[]] {
  const base = { key: (r: Req) => r.k, window: '10s' as const, cost: (r: Req) => r.cost ?? 1 };
  const first = { ...base, key: (r: Req) => (r.k === 'z' ? undefined : r.k) };
  return [
    [
      { ...first, name: 'ip', limit: 3, algorithm: a, blockFor: '5s' },
      { ...base, name: 'shared', group: 'g', limit: 5, algorithm: 'fixed-window' },
    ],
    [
      { ...first, name: 'ip', limit: 4, algorithm: b, countRejected: true },
      { ...base, name: 'shared2', group: 'g', limit: 6, algorithm: 'fixed-window' },
    ],
  ];
}

/** What a decision says, field by field (the receipt and timing left out). */
function figures(d: { allowed: boolean; rules: readonly object[] }) {
  return { allowed: d.allowed, rules: d.rules.map((r) => ({ ...r })) };
}

describe('MemoryStore plans', () => {
  it('limiters sharing a store decide through their plans exactly as the plain store path decides, interleaved in any order', () => {
    const step = fc.record({
      which: fc.nat(1),
      k: fc.constantFrom('a', 'b', 'z'),
      cost: fc.integer({ min: 1, max: 3 }),
      advance: fc.constantFrom(0, 0, 300, 2_500),
    });
    fc.assert(
      fc.property(
        fc.constantFrom(...ALGORITHMS),
        fc.constantFrom(...ALGORITHMS),
        fc.array(step, { minLength: 1, maxLength: 60 }),
        (a, b, steps) => {
          const clock = new ManualClock(1_000_000);
          const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
          const twin = new MemoryStore({ clock, sweepIntervalMs: 0 });
          const [ra, rb] = stacks(a, b);
          const planned = [createLimiter<Req>({ rules: ra, store, clock }), createLimiter<Req>({ rules: rb, store, clock })];
          for (const s of steps) {
            clock.advance(s.advance);
            const lim = planned[s.which] as (typeof planned)[number];
            const req = { k: s.k, cost: s.cost };
            // The same ops on the twin store through `consumeSync`, which finds each table afresh.
            const ops: StoreOp[] = lim.resolve(req);
            const want: StoreDecision = twin.consumeSync(ops, clock.now());
            const got = lim.consumeSync(req);
            expect(got && figures(got)).toEqual({
              allowed: want.allowed,
              rules: ops.map((op, i) => expect.objectContaining({ name: op.rule.name, ...pick(want.outcomes[i]) })),
            });
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it("a plan decides a rule it was not prepared for on that rule's own table, never on a prepared one", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const [ra, rb] = stacks('fixed-window', 'token-bucket');
    const a = createLimiter<Req>({ rules: ra, store, clock });
    const b = createLimiter<Req>({ rules: rb, store, clock });
    const opsA = a.resolve({ k: 'x' });
    const opsB = b.resolve({ k: 'x' });
    const plan = store.prepare(opsA.map((op) => op.rule));
    // B's token-bucket 'ip' is not A's fixed-window 'ip': three of B's ops through A's plan.
    for (let i = 0; i < 3; i++) plan.consume([opsB[0] as StoreOp], clock.now());
    const get = (op: StoreOp) => store.keyOp(op.rule, op.key, { kind: 'get' });
    expect(await get(opsA[0] as StoreOp)).toMatchObject({ exists: false, remaining: 3 });
    expect(await get(opsB[0] as StoreOp)).toMatchObject({ exists: true, remaining: 4 - 3 });
  });

  it("a plan hands out its own outcomes, overwritten by its next decision; another plan's decisions leave them alone", () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const spec = createLimiter<Req>({ rules: [{ name: 'r', key: (q) => q.k, limit: 2, window: '1m' }], store, clock }).resolve({ k: 'a' });
    const one = store.prepare([spec[0]?.rule as RuleSpec]);
    const two = store.prepare([spec[0]?.rule as RuleSpec]);
    const d1 = one.consume(spec);
    expect(d1.outcomes[0]?.remaining).toBe(1);
    two.consume(spec);
    expect(d1.outcomes[0]?.remaining).toBe(1);
    expect(one.consume(spec).outcomes[0]).toMatchObject({ allowed: false, remaining: 0 });
  });
});

function pick(o: StoreDecision['outcomes'][number] | undefined) {
  const { allowed, remaining, resetMs, retryAfterMs, delayMs } = o as NonNullable<typeof o>;
  return { allowed, remaining, resetMs, retryAfterMs, delayMs };
}

describe('the limiter and Store.prepare', () => {
  /** A MemoryStore that records every stack it is asked to prepare. */
  class Recording extends MemoryStore {
    readonly prepared: string[][] = [];
    override prepare(rules: readonly RuleSpec[]) {
      this.prepared.push(rules.map((r) => `${r.name}:${r.limit}`));
      return super.prepare(rules);
    }
  }

  it('prepares once (base and tier rules in the order their ops come), and again after an update', async () => {
    const store = new Recording({ sweepIntervalMs: 0 });
    const limiter = createLimiter<Req & { plan: string }>({
      store,
      // A still clock: the figures below hold wherever a minute ends among the decisions.
      clock: new ManualClock(1_000_000),
      rules: [{ name: 'ip', key: (r) => r.k, limit: 10, window: '1m' }],
      tiers: {
        free: [{ name: 'free', key: (r) => r.k, limit: 2, window: '1m' }],
        pro: [{ name: 'pro', key: (r) => r.k, limit: 5, window: '1m' }],
      },
      tier: (r) => r.plan,
    });
    expect(store.prepared).toEqual([]);
    for (let i = 0; i < 3; i++) await limiter.consume({ k: 'a', plan: i % 2 === 0 ? 'free' : 'pro' });
    expect(store.prepared).toEqual([['ip:10', 'free:2', 'pro:5']]);
    limiter.update('pro', { limit: 7 });
    const d = await limiter.consume({ k: 'a', plan: 'pro' });
    expect(store.prepared).toEqual([
      ['ip:10', 'free:2', 'pro:5'],
      ['ip:10', 'free:2', 'pro:7'],
    ]);
    // The state is kept across the update: pro's two earlier units, one more now.
    expect(d.rules.map((r) => [r.name, r.remaining])).toEqual([
      ['ip', 10 - 4],
      ['pro', 7 - 2],
    ]);
    // An extended limiter shares the family: its own plan, prepared again after an update too.
    const ext = limiter.extend([{ name: 'route', key: () => 'GET /', limit: 100, window: '1m' }]);
    await ext.consume({ k: 'a', plan: 'free' });
    expect(store.prepared.at(-1)).toEqual(['ip:10', 'route:100', 'free:2', 'pro:7']);
    limiter.update('route', { limit: 50 });
    await ext.consume({ k: 'a', plan: 'free' });
    expect(store.prepared.at(-1)).toEqual(['ip:10', 'route:50', 'free:2', 'pro:7']);
  });

  it('a limit per request decides through the prepared plan (its derived rule shares the state) without preparing again', async () => {
    const store = new Recording({ sweepIntervalMs: 0 });
    const limiter = createLimiter<Req & { L: number }>({
      store,
      // A still clock: the figures below hold wherever a minute ends among the decisions.
      clock: new ManualClock(1_000_000),
      rules: [{ name: 'ip', key: (r) => r.k, limit: (r) => r.L, window: '1m' }],
    });
    await limiter.consume({ k: 'a', L: 5 });
    const d = await limiter.consume({ k: 'a', L: 3 });
    expect(store.prepared).toHaveLength(1);
    expect(d.rules[0]).toMatchObject({ limit: 3, remaining: 1 });
  });
});
