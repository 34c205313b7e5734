/**
 * `sliding-buckets` through the public limiter, on MemoryStore and on RedisStore (the
 * suite's own redis-server, supplied time): every decision of random sequences (weighted
 * costs, refunds, countRejected) against a brute-force model that sums the cost of each
 * block from the admission history, with `retryAfterMs` and `resetMs` probed exactly; N = 1
 * decides as a clock-aligned fixed window; at most L units in any interval of W - b; the
 * coded configuration errors; reward and update.
 */
import { createLimiter, type Decision, ManualClock, MemoryStore, type Rule, type Store, TollgateError } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { prng } from './store-contract.js';

// A UTC midnight: every block of the rules below starts on a multiple of its width from here.
const START = Date.UTC(2026, 0, 1);

type Req = { k: string; n?: number };

/**
 * The contract by brute force: the cost counted in each block (by index), and the count at
 * `t` summed over the N blocks up to t's. Waiting is tried at every boundary until the
 * window has passed.
 */
class Model {
  readonly blocks = new Map<number, number>();
  readonly b: number;
  constructor(
    readonly L: number,
    readonly W: number,
    readonly N: number,
  ) {
    this.b = W / N;
  }

  count(t: number): number {
    const k = Math.floor(t / this.b);
    let sum = 0;
    for (const [j, c] of this.blocks) if (j > k - this.N && j <= k) sum += c;
    return sum;
  }

  /** ms from t until the newest non-empty block in the window has left it (none: 0). */
  resetMs(t: number): number {
    const k = Math.floor(t / this.b);
    let newest = Number.NEGATIVE_INFINITY;
    for (const [j, c] of this.blocks) if (c > 0 && j > k - this.N && j <= k) newest = Math.max(newest, j);
    return newest === Number.NEGATIVE_INFINITY ? 0 : (newest + this.N) * this.b - t;
  }

  /** ms from t until the first boundary where a request of `cost` fits. */
  retryMs(t: number, cost: number): number {
    const k = Math.floor(t / this.b);
    for (let j = k + 1; j <= k + this.N; j++) if (this.count(j * this.b) + cost <= this.L) return j * this.b - t;
    throw new Error('never fits');
  }

  add(t: number, cost: number): void {
    const j = Math.floor(t / this.b);
    this.blocks.set(j, (this.blocks.get(j) ?? 0) + cost);
  }

  refund(t: number, cost: number): void {
    const j = Math.floor(t / this.b);
    this.blocks.set(j, Math.max(0, (this.blocks.get(j) ?? 0) - cost));
  }

  decide(t: number, cost: number, countRejected: boolean) {
    const count = this.count(t);
    if (count + cost <= this.L) {
      this.add(t, cost);
      return { allowed: true, remaining: this.L - count - cost, resetMs: this.resetMs(t), retryAfterMs: 0 };
    }
    if (countRejected) this.add(t, cost);
    return {
      allowed: false,
      remaining: Math.max(0, this.L - this.count(t)),
      resetMs: this.resetMs(t),
      retryAfterMs: this.retryMs(t, cost),
    };
  }
}

interface Case {
  label: string;
  L: number;
  W: number;
  N: number;
  maxCost: number;
  countRejected?: boolean;
}

const CASES: readonly Case[] = [
  { label: '5 per 1 s, N 10', L: 5, W: 1000, N: 10, maxCost: 1 },
  { label: '12 per 990 ms, N 9, cost <= 4', L: 12, W: 990, N: 9, maxCost: 4 },
  { label: '8 per 1 s, N 1, cost <= 3', L: 8, W: 1000, N: 1, maxCost: 3 },
  { label: '6 per 600 ms, N 600, cost <= 2', L: 6, W: 600, N: 600, maxCost: 2 },
  { label: '7 per 1 s, N 4, countRejected, cost <= 2', L: 7, W: 1000, N: 4, maxCost: 2, countRejected: true },
];

function suite(name: string, makeStore: (clock: ManualClock, prefix: string) => Store): void {
  describe(`${name}: sliding-buckets`, () => {
    let n = 0;
    function limiter(rules: Rule<Req>[], clock: ManualClock) {
      const prefix = `sb${++n}`;
      const store = makeStore(clock, `${prefix}:`);
      return { store, l: createLimiter<Req>({ rules, store, clock, prefix }) };
    }
    const ruleOf = (c: Case): Rule<Req> => ({
      name: 'r',
      key: (q) => q.k,
      algorithm: 'sliding-buckets',
      limit: c.L,
      window: c.W,
      buckets: c.N,
      countRejected: c.countRejected ?? false,
      cost: (q) => q.n ?? 1,
    });

    for (const c of CASES) {
      it(`${c.label}: every decision as the block sums say, retryAfterMs and resetMs exact`, async () => {
        const clock = new ManualClock(START);
        const { store, l } = limiter([ruleOf(c)], clock);
        const rnd = prng(c.label.length * 7919 + c.N);
        const model = new Model(c.L, c.W, c.N);
        const admitted: { req: Req; d: Decision; cost: number }[] = [];
        let refusals = 0;
        let resets = 0;
        let refunds = 0;
        for (let step = 0; step < 150; step++) {
          clock.advance(rnd() < 0.85 ? Math.floor(rnd() * (c.W / 10)) : Math.floor(rnd() * c.W));
          const t = clock.now();
          const what = `${c.label} step ${step} at +${t - START}`;
          if (admitted.length > 0 && rnd() < 0.1) {
            // A refund of an earlier admission: its cost leaves the block it was counted in.
            const [a] = admitted.splice(Math.floor(rnd() * admitted.length), 1);
            if (a !== undefined) {
              await l.refund(a.req, a.d);
              model.refund(a.d.at, a.cost);
              refunds++;
            }
            continue;
          }
          const req = { k: 'a', n: 1 + Math.floor(rnd() * c.maxCost) };
          const d = await l.consume(req);
          const want = model.decide(t, req.n, c.countRejected ?? false);
          const r = d.rules[0];
          expect({ allowed: r?.allowed, remaining: r?.remaining, resetMs: r?.resetMs, retryAfterMs: r?.retryAfterMs }, what).toEqual(want);
          if (d.allowed) admitted.push({ req, d, cost: req.n });
          else {
            // Exact: refused 1 ms before retryAfterMs, admitted at it (the sequence goes on from there).
            refusals++;
            clock.set(t + d.retryAfterMs - 1);
            expect((await l.peek(req)).allowed, `${what}: at +retryAfterMs - 1`).toBe(false);
            clock.set(t + d.retryAfterMs);
            expect((await l.peek(req)).allowed, `${what}: at +retryAfterMs`).toBe(true);
          }
          if (r !== undefined && r.resetMs > 0 && rnd() < 0.15) {
            // The full quota is back at +resetMs, not a millisecond before.
            resets++;
            const at = t + r.resetMs;
            if (clock.now() <= at - 1) {
              clock.set(at - 1);
              expect((await l.peek(req, { cost: c.L })).allowed, `${what}: full quota at +resetMs - 1`).toBe(false);
            }
            clock.set(Math.max(clock.now(), at));
            expect((await l.peek(req, { cost: c.L })).allowed, `${what}: full quota at +resetMs`).toBe(true);
          }
        }
        expect(refusals, 'the sequence must reach the limit often').toBeGreaterThan(10);
        expect(resets).toBeGreaterThan(3);
        expect(refunds).toBeGreaterThan(3);
        await store.close();
      });
    }

    it('N = 1 decides exactly as a clock-aligned fixed window (also with countRejected, and time stepping back)', async () => {
      for (const countRejected of [false, true]) {
        const clock = new ManualClock(START);
        const common = { key: (q: Req) => q.k, limit: 6, window: 1000, countRejected, cost: (q: Req) => q.n ?? 1 };
        const { store, l } = limiter(
          [
            { name: 'fw', algorithm: 'fixed-window', ...common },
            { name: 'sb', algorithm: 'sliding-buckets', buckets: 1, ...common },
          ],
          clock,
        );
        const rnd = prng(countRejected ? 11 : 7);
        let refused = 0;
        for (let step = 0; step < 200; step++) {
          clock.advance(rnd() < 0.1 ? -Math.floor(rnd() * 300) : Math.floor(rnd() * 250));
          const n = 1 + Math.floor(rnd() * 3);
          // One stack: the two rules see the same history, so they admit and refuse together.
          const [a, b] = (await l.consume({ k: `x${step % 3}`, n })).rules;
          expect({ ...b, name: 'fw' }, `step ${step}`).toEqual(a);
          if (!a?.allowed) refused++;
        }
        expect(refused).toBeGreaterThan(20);
        await store.close();
      }
    });

    it('at most L units in any interval of W - b (checked offline over the admissions)', async () => {
      for (const c of CASES.filter((x) => !x.countRejected)) {
        const clock = new ManualClock(START);
        const { store, l } = limiter([ruleOf(c)], clock);
        const rnd = prng(c.W + c.N);
        const got: { t: number; cost: number }[] = [];
        for (let step = 0; step < 400; step++) {
          clock.advance(Math.floor(rnd() * (c.W / 8)));
          const n = 1 + Math.floor(rnd() * c.maxCost);
          const d = await l.consume({ k: 'g', n });
          if (d.allowed) got.push({ t: d.at, cost: n });
        }
        const span = c.W - c.W / c.N;
        let most = 0;
        for (const a of got) {
          let sum = 0;
          for (const o of got) if (o.t >= a.t && o.t <= a.t + span) sum += o.cost;
          most = Math.max(most, sum);
        }
        expect(most, c.label).toBeLessThanOrEqual(c.L);
        // The bound is reached (N > 1; for N = 1 the interval is a point): the sequence is dense enough to test it.
        if (c.N > 1) expect(most, c.label).toBe(c.L);
        await store.close();
      }
    });

    it('tiers: each plan a sliding-buckets budget of its own, a group shared between two tiers', async () => {
      const clock = new ManualClock(START);
      const prefix = `sb${++n}`;
      const store = makeStore(clock, `${prefix}:`);
      type TierReq = Req & { plan: string };
      const rule = (name: string, limit: number): Rule<TierReq> => ({
        name,
        key: (q) => q.k,
        group: 'plan',
        algorithm: 'sliding-buckets',
        limit,
        window: '1s',
        buckets: 4,
      });
      const l = createLimiter<TierReq>({
        tiers: { free: [rule('free', 2)], pro: [rule('pro', 5)] },
        tier: (q) => q.plan,
        store,
        clock,
        prefix,
      });
      const admitted = async (plan: string, times: number) => {
        let ok = 0;
        for (let i = 0; i < times; i++) if ((await l.consume({ k: 'a', plan })).allowed) ok++;
        return ok;
      };
      expect(await admitted('free', 4)).toBe(2);
      // One budget (the group): the pro limit counts the two free units too.
      expect(await admitted('pro', 5)).toBe(3);
      clock.advance(250);
      const d = await l.consume({ k: 'a', plan: 'pro' });
      // The block at START leaves the window at START + 1000.
      expect(d.rules[0]).toMatchObject({ name: 'pro', allowed: false, retryAfterMs: 750, resetMs: 750 });
      await store.close();
    });

    it('reward gives back the newest blocks first; update keeps the blocks under a new limit', async () => {
      const clock = new ManualClock(START);
      const { store, l } = limiter([{ name: 'r', key: (q) => q.k, algorithm: 'sliding-buckets', limit: 10, window: '1s' }], clock);
      await l.consume({ k: 'a' }, { cost: 2 });
      clock.advance(100);
      await l.consume({ k: 'a' }, { cost: 3 });
      clock.advance(50);
      // 5 used in blocks 0 and 1 (100 ms each); 4 back: all of block 1, 1 of block 0.
      const after = await l.reward('r', 'a', 4);
      expect(after).toMatchObject({ remaining: 9, resetMs: 850, retryAfterMs: 0 });
      await l.penalize('r', 'a', 6);
      expect(await l.get('r', 'a')).toMatchObject({ remaining: 3, resetMs: 950 });
      l.update('r', { limit: 4 });
      const d = await l.consume({ k: 'a' }, { cost: 3 });
      // 7 counted against the new limit 4: block 0 (1) leaves at +850, block 1 (6) at +950.
      expect(d.rules[0]).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 950, resetMs: 950 });
      await store.close();
    });
  });
}

suite('MemoryStore', (clock) => new MemoryStore({ clock, sweepIntervalMs: 0 }));

describe('RedisStore', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ port: server.port, host: '127.0.0.1' });
  });
  afterAll(async () => {
    client.disconnect();
    await server.destroy();
  });
  suite('RedisStore', (clock, prefix) => new RedisStore({ client, clock, prefix, timeoutMs: 5000 }));
});

describe('sliding-buckets configuration', () => {
  const make = (rule: Partial<Rule<Req>>) => () =>
    createLimiter<Req>({ rules: [{ name: 'r', algorithm: 'sliding-buckets', limit: 5, window: 1000, ...rule } as Rule<Req>] });
  function codeOf(f: () => unknown): TollgateError {
    try {
      f();
    } catch (err) {
      expect(err).toBeInstanceOf(TollgateError);
      return err as TollgateError;
    }
    throw new Error('no error');
  }

  it('a window that is not a whole multiple of N ms is a coded error naming a divisor', () => {
    const err = codeOf(make({ window: 997 }));
    expect(err.code).toBe('TG_INVALID_OPTION');
    expect(err.path).toBe('rules[0] "r".buckets');
    expect(err.fix).toContain('buckets: 1,');
    const err7 = codeOf(make({ window: 1000, buckets: 7 }));
    expect(err7.fix).toContain('buckets: 5');
    expect(err7.fix).toContain('1001 ms');
  });

  it.each([0, -1, 2.5, 1001, Number.NaN, '10'])('buckets %s is a coded error', (buckets) => {
    const err = codeOf(make({ window: 60_000, buckets: buckets as number }));
    expect(err.code).toBe('TG_INVALID_OPTION');
    expect(err.path).toBe('rules[0] "r".buckets');
  });

  it('buckets on another algorithm is a coded error; N is part of the storage identity', () => {
    const err = codeOf(() => createLimiter({ rules: [{ name: 'r', algorithm: 'sliding-window', limit: 5, window: 1000, buckets: 10 }] }));
    expect(err.code).toBe('TG_INVALID_OPTION');
    expect(err.path).toBe('rules[0] "r".buckets');
    const ten = createLimiter({ rules: [{ name: 'r', algorithm: 'sliding-buckets', limit: 5, window: 60_000 }] });
    const six = createLimiter({ rules: [{ name: 'r', algorithm: 'sliding-buckets', limit: 5, window: 60_000, buckets: 6 }] });
    expect(ten.rules[0]?.spec.id).toBe('tg:r:b60000n10');
    expect(six.rules[0]?.spec.id).toBe('tg:r:b60000n6');
    expect(ten.rules[0]?.spec.buckets).toBe(10);
  });
});
