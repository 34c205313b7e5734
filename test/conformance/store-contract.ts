/**
 * The store conformance suite: one call per store, the same cases for all.
 *
 *   storeContract('MemoryStore', (clock) => new MemoryStore({ clock }));
 *
 * Everything goes through the public limiter (`createLimiter({ rules, store, clock, prefix })`)
 * with a `ManualClock`, so the suite never reaches into a store's internals and works for
 * any store (the Redis store runs it against standalone Redis and Redis Cluster). Every test
 * uses its own random prefix, so a shared server never leaks state from one test to another.
 *
 * Covers SPEC 1 (retryAfterMs exact for every algorithm), 3 (each algorithm, weighted cost,
 * blockFor, countRejected, time going backwards, peek), 4 (stacks, undefined keys, groups,
 * dry-run), 6.1 (refund, reset, expiry) and 8.5 (calendar quotas).
 */
import { type Clock, createLimiter, type Decision, type Limiter, ManualClock, type Rule, type Store } from '@tollgate/core';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { valuesContract } from './values-contract.js';

/** What the suite's rules read from a "request". */
export interface ContractReq {
  /** The key of rules that use `byKey` (default "a"). */
  k?: string;
  /** The cost read by rules with a cost function. */
  n?: number;
  /** A per-user key; `undefined`/`null` means the rule does not apply. */
  user?: string | null;
}

export interface StoreContractOptions {
  /** Runs after each test, before the store is closed (e.g. to check for keys without TTL). */
  afterEach?: (store: Store) => Promise<void> | void;
  /** Start of every test's prefix (a random part is appended). @default 'ct' */
  prefix?: string;
}

/** A UTC midnight: a multiple of every window used below (1 s, 60 s, 10 s, 1 h, 1 d). */
const START = Date.UTC(2026, 0, 1);

const byKey = (req: ContractReq): string => req.k ?? 'a';

/** The public figures of a decision, without its time (for comparing two keys). */
function figures(d: Decision) {
  return { allowed: d.allowed, delayMs: d.delayMs, retryAfterMs: d.retryAfterMs, rejectedBy: d.rejectedBy, rules: d.rules };
}

/** A small deterministic PRNG (mulberry32), so failures replay. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The algorithm configurations every per-algorithm case runs over. */
export const ALGORITHM_CASES: readonly { label: string; rule: Omit<Rule<ContractReq>, 'name'> }[] = [
  { label: 'fixed-window clock', rule: { algorithm: 'fixed-window', limit: 5, window: '1s' } },
  { label: 'fixed-window first-request', rule: { algorithm: 'fixed-window', align: 'first-request', limit: 5, window: '1s' } },
  { label: 'sliding-log', rule: { algorithm: 'sliding-log', limit: 5, window: '1s' } },
  { label: 'sliding-window', rule: { algorithm: 'sliding-window', limit: 5, window: '1s' } },
  { label: 'token-bucket', rule: { algorithm: 'token-bucket', limit: 5, window: '1s' } },
  { label: 'leaky-bucket meter', rule: { algorithm: 'leaky-bucket', limit: 5, window: '1s' } },
  { label: 'leaky-bucket queue', rule: { algorithm: 'leaky-bucket', mode: 'queue', limit: 5, window: '1s' } },
  { label: 'sliding-buckets', rule: { algorithm: 'sliding-buckets', limit: 5, window: '1s' } },
];

/** Parameter sets for retryAfterMs exactness: costs above 1, non-whole-ms intervals (3/s). */
const EXACTNESS_CASES: readonly { label: string; rule: Omit<Rule<ContractReq>, 'name'>; maxCost: number; span: number }[] = [
  { label: 'fixed-window 5/1s', rule: { algorithm: 'fixed-window', limit: 5, window: '1s' }, maxCost: 1, span: 1000 },
  { label: 'fixed-window 7/1s cost<=3', rule: { algorithm: 'fixed-window', limit: 7, window: '1s' }, maxCost: 3, span: 1000 },
  {
    label: 'fixed-window first-request 3/999ms cost<=2',
    rule: { algorithm: 'fixed-window', align: 'first-request', limit: 3, window: 999 },
    maxCost: 2,
    span: 999,
  },
  { label: 'sliding-log 5/1s', rule: { algorithm: 'sliding-log', limit: 5, window: '1s' }, maxCost: 1, span: 1000 },
  { label: 'sliding-log 10/997ms cost<=4', rule: { algorithm: 'sliding-log', limit: 10, window: 997 }, maxCost: 4, span: 997 },
  { label: 'sliding-window 5/1s', rule: { algorithm: 'sliding-window', limit: 5, window: '1s' }, maxCost: 1, span: 1000 },
  { label: 'sliding-window 3/1s', rule: { algorithm: 'sliding-window', limit: 3, window: '1s' }, maxCost: 1, span: 1000 },
  { label: 'sliding-window 10/997ms cost<=4', rule: { algorithm: 'sliding-window', limit: 10, window: 997 }, maxCost: 4, span: 997 },
  { label: 'token-bucket 3/s', rule: { algorithm: 'token-bucket', rate: '3/s' }, maxCost: 1, span: 1000 },
  { label: 'token-bucket 3/s burst 7 cost<=5', rule: { algorithm: 'token-bucket', rate: '3/s', burst: 7 }, maxCost: 5, span: 1000 },
  { label: 'token-bucket 100/1m cost<=9', rule: { algorithm: 'token-bucket', rate: '100/1m', burst: 10 }, maxCost: 9, span: 2000 },
  { label: 'leaky meter 3/s', rule: { algorithm: 'leaky-bucket', rate: '3/s' }, maxCost: 1, span: 1000 },
  { label: 'leaky meter 7/s burst 4 cost<=3', rule: { algorithm: 'leaky-bucket', rate: '7/s', burst: 4 }, maxCost: 3, span: 1000 },
  { label: 'leaky queue 3/s Q=4', rule: { algorithm: 'leaky-bucket', mode: 'queue', rate: '3/s', queue: 4 }, maxCost: 1, span: 1000 },
  {
    label: 'leaky queue 7/s Q=5 cost<=3',
    rule: { algorithm: 'leaky-bucket', mode: 'queue', rate: '7/s', queue: 5 },
    maxCost: 3,
    span: 1000,
  },
  {
    label: 'fixed-window countRejected 4/1s cost<=2',
    rule: { algorithm: 'fixed-window', limit: 4, window: '1s', countRejected: true },
    maxCost: 2,
    span: 1000,
  },
  {
    label: 'sliding-log countRejected 4/1s',
    rule: { algorithm: 'sliding-log', limit: 4, window: '1s', countRejected: true },
    maxCost: 1,
    span: 1000,
  },
  {
    label: 'sliding-window countRejected 4/1s',
    rule: { algorithm: 'sliding-window', limit: 4, window: '1s', countRejected: true },
    maxCost: 1,
    span: 1000,
  },
  {
    label: 'token-bucket countRejected 3/s cost<=2',
    rule: { algorithm: 'token-bucket', rate: '3/s', countRejected: true },
    maxCost: 2,
    span: 1000,
  },
  {
    label: 'leaky meter countRejected 3/s',
    rule: { algorithm: 'leaky-bucket', rate: '3/s', countRejected: true },
    maxCost: 1,
    span: 1000,
  },
  { label: 'sliding-buckets 5/1s', rule: { algorithm: 'sliding-buckets', limit: 5, window: '1s' }, maxCost: 1, span: 1000 },
  {
    label: 'sliding-buckets 10/990ms N=9 cost<=4',
    rule: { algorithm: 'sliding-buckets', limit: 10, window: 990, buckets: 9 },
    maxCost: 4,
    span: 990,
  },
  {
    label: 'sliding-buckets countRejected 4/1s N=4 cost<=2',
    rule: { algorithm: 'sliding-buckets', limit: 4, window: '1s', buckets: 4, countRejected: true },
    maxCost: 2,
    span: 1000,
  },
  {
    label: 'fixed-window blockFor 2.5s',
    rule: { algorithm: 'fixed-window', limit: 3, window: '1s', blockFor: 2500 },
    maxCost: 1,
    span: 1000,
  },
];

/**
 * Registers the conformance suite for one store.
 * @param factory builds a fresh store for each test; it receives the test's clock.
 * @example storeContract('MemoryStore', (clock) => new MemoryStore({ clock }));
 */
export function storeContract(
  name: string,
  factory: (clock: ManualClock) => Store | Promise<Store>,
  options: StoreContractOptions = {},
): void {
  describe(`store contract: ${name}`, () => {
    let clock: ManualClock;
    let store: Store;
    let prefix: string;
    let serial = 0;

    beforeEach(async () => {
      clock = new ManualClock(START);
      store = await factory(clock);
      serial++;
      prefix = `${options.prefix ?? 'ct'}${serial}x${Math.floor(Math.random() * 2 ** 40).toString(36)}`;
    });

    afterEach(async () => {
      await options.afterEach?.(store);
      await store.close();
    });

    /** A limiter over the test's store, clock and prefix. */
    function limiter(rules: Rule<ContractReq>[], clk: Clock = clock): Limiter<ContractReq> {
      return createLimiter<ContractReq>({ rules, store, clock: clk, prefix });
    }

    /** A one-rule limiter; the rule is named "r" and counts under `req.k`. */
    function one(rule: Omit<Rule<ContractReq>, 'name'>): Limiter<ContractReq> {
      return limiter([{ name: 'r', key: byKey, ...rule }]);
    }

    /** Consumes `n` requests at the current time and returns the decisions. */
    async function burst(l: Limiter<ContractReq>, n: number, req: ContractReq = {}): Promise<Decision[]> {
      const out: Decision[] = [];
      for (let i = 0; i < n; i++) out.push(await l.consume(req));
      return out;
    }

    /**
     * SPEC 1: at now + retryAfterMs - 1 the same request is still rejected, at now +
     * retryAfterMs it is admitted. Uses peek, so nothing is consumed by the check.
     */
    async function expectExactRetry(l: Limiter<ContractReq>, d: Decision, req: ContractReq, cost: number | undefined, what: string) {
      const now = clock.now();
      expect(d.allowed, `${what}: rejected`).toBe(false);
      expect(d.retryAfterMs, `${what}: retryAfterMs > 0`).toBeGreaterThan(0);
      expect(Number.isInteger(d.retryAfterMs), `${what}: whole ms`).toBe(true);
      const opt = cost === undefined ? undefined : { cost };
      clock.set(now + d.retryAfterMs - 1);
      expect((await l.peek(req, opt)).allowed, `${what}: still rejected at +${d.retryAfterMs - 1}`).toBe(false);
      clock.set(now + d.retryAfterMs);
      expect((await l.peek(req, opt)).allowed, `${what}: admitted at +${d.retryAfterMs}`).toBe(true);
    }

    describe('fixed-window', () => {
      it('clock-aligned: an instant exactly at (k+1)·W opens a new window (and 2·L pass around it)', async () => {
        const l = one({ algorithm: 'fixed-window', limit: 2, window: '1s' });
        clock.set(START + 999);
        const [a, b, c] = await burst(l, 3);
        expect([a?.allowed, b?.allowed, c?.allowed]).toEqual([true, true, false]);
        expect(a?.rules[0]?.remaining).toBe(1);
        expect(c?.retryAfterMs).toBe(1);
        clock.set(START + 1000);
        const next = await burst(l, 3);
        // The documented flaw: four admitted within 2 ms around the boundary.
        expect(next.map((d) => d.allowed)).toEqual([true, true, false]);
        expect(next[2]?.retryAfterMs).toBe(1000);
        expect(next[0]?.rules[0]?.resetMs).toBe(1000);
      });

      // Nothing counted is no state: on a Redis Cluster a slot refunded after another slot
      // refused keeps none either, so both agree on where the window starts.
      it('first-request: a request of cost 0 opens no window; the first one counted does', async () => {
        const l = one({ algorithm: 'fixed-window', align: 'first-request', limit: 5, window: '1s' });
        expect((await l.consume({}, { cost: 0 })).rules[0]).toMatchObject({ allowed: true, remaining: 5, resetMs: 0 });
        expect((await l.get('r', 'a')).exists).toBe(false);
        clock.set(START + 500);
        expect((await l.consume({})).rules[0]).toMatchObject({ remaining: 4, resetMs: 1000 });
      });

      it('first-request: a request of cost 0 opens no window under two rules of one group either', async () => {
        const rule = { key: byKey, group: 'g', algorithm: 'fixed-window', align: 'first-request', limit: 5, window: '1s' } as const;
        const l = limiter([
          { name: 'a', ...rule },
          { name: 'b', ...rule },
        ]);
        await l.consume({}, { cost: 0 });
        expect((await l.get('a', 'a')).exists).toBe(false);
        clock.set(START + 500);
        expect((await l.consume({})).rules.map((x) => x.resetMs)).toEqual([1000, 1000]);
      });

      it('first-request: the window starts at the first request and the first one at or after s+W opens the next', async () => {
        const l = one({ algorithm: 'fixed-window', align: 'first-request', limit: 2, window: '1s' });
        clock.set(START + 300);
        expect((await burst(l, 2)).every((d) => d.allowed)).toBe(true);
        clock.set(START + 1299);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(1);
        clock.set(START + 1300);
        expect((await l.consume({})).allowed).toBe(true);
        // The new window started at 1300, not at a clock boundary.
        clock.set(START + 2000);
        expect((await l.consume({})).allowed).toBe(true);
        const e = await l.consume({});
        expect(e.allowed).toBe(false);
        expect(e.retryAfterMs).toBe(300);
        // A window opens at the first request after the previous one ended, however late.
        clock.set(START + 5700);
        const f = await l.consume({});
        expect(f.allowed).toBe(true);
        expect(f.rules[0]?.resetMs).toBe(1000);
      });
    });

    describe('sliding-log', () => {
      it('an entry exactly W old has expired', async () => {
        const l = one({ algorithm: 'sliding-log', limit: 2, window: '1s' });
        expect((await l.consume({})).allowed).toBe(true);
        clock.set(START + 400);
        expect((await l.consume({})).allowed).toBe(true);
        clock.set(START + 999);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(1);
        clock.set(START + 1000);
        expect((await l.consume({})).allowed).toBe(true);
        const e = await l.consume({});
        expect(e.allowed).toBe(false);
        expect(e.retryAfterMs).toBe(400);
      });

      it('admits by cost sum: a request of cost 3 waits for enough entries to expire', async () => {
        const l = one({ algorithm: 'sliding-log', limit: 4, window: '1s' });
        for (const t of [0, 100, 200, 300]) {
          clock.set(START + t);
          expect((await l.consume({})).allowed).toBe(true);
        }
        clock.set(START + 500);
        const d = await l.consume({}, { cost: 3 });
        expect(d.allowed).toBe(false);
        // Entries at 0, 100 and 200 must expire: at 1200.
        expect(d.retryAfterMs).toBe(700);
        await expectExactRetry(l, d, {}, 3, 'cost 3');
      });
    });

    describe('sliding-window', () => {
      it('SPEC worked example: L=100, W=60s, prev=80, cur=30, 15 s in → admitted, estimate 90', async () => {
        const l = one({ algorithm: 'sliding-window', limit: 100, window: '60s', cost: (req) => req.n ?? 1 });
        clock.set(START + 30_000);
        expect((await l.consume({ n: 80 })).allowed).toBe(true);
        clock.set(START + 75_000);
        // estimate before: 80·0.75 + 0 = 60; 60 + 30 <= 100
        expect((await l.consume({ n: 30 })).allowed).toBe(true);
        const d = await l.consume({ n: 1 });
        expect(d.allowed).toBe(true);
        // remaining = L - floor(estimate) - cost = 100 - 90 - 1
        expect(d.rules[0]?.remaining).toBe(9);
        const p = await l.peek({ n: 10 });
        // estimate now 91: 91 + 10 > 100
        expect(p.allowed).toBe(false);
        expect((await l.peek({ n: 9 })).allowed).toBe(true);
      });

      it('admits iff floor(estimate) + cost <= L over a range of prev/cur/elapsed, with exact retryAfterMs', async () => {
        const L = 10;
        const W = 1000;
        let checked = 0;
        let rejected = 0;
        for (const prev of [0, 1, 3, 7, 10]) {
          for (const cur of [0, 1, 4, 9, 10]) {
            const g = `g${prev}_${cur}`;
            // The loader counts rejected requests too, so it can set cur to any value; the
            // probe shares its counter (same group) but never writes when rejected.
            const loader = limiter([
              {
                name: 'load',
                group: g,
                key: byKey,
                algorithm: 'sliding-window',
                limit: L,
                window: W,
                countRejected: true,
                cost: (r) => r.n ?? 1,
              },
            ]);
            const probe = limiter([{ name: 'probe', group: g, key: byKey, algorithm: 'sliding-window', limit: L, window: W }]);
            const base = START + 10 * W;
            clock.set(base - W);
            if (prev > 0) await loader.consume({ n: prev });
            clock.set(base);
            if (cur > 0) await loader.consume({ n: cur });
            for (const e of [0, 1, 250, 500, 999]) {
              for (const cost of [1, 2, 5]) {
                clock.set(base + e);
                const d = await probe.peek({}, { cost });
                const floorEstimate = Math.floor((prev * (W - e) + cur * W) / W);
                const what = `prev=${prev} cur=${cur} e=${e} cost=${cost}`;
                expect(d.allowed, what).toBe(floorEstimate + cost <= L);
                expect(d.rules[0]?.remaining, what).toBe(Math.max(0, L - floorEstimate - (d.allowed ? cost : 0)));
                checked++;
                if (!d.allowed) {
                  rejected++;
                  await expectExactRetry(probe, d, {}, cost, what);
                }
              }
            }
          }
        }
        expect(checked).toBe(375);
        expect(rejected).toBeGreaterThan(50);
      });
    });

    describe('token-bucket', () => {
      it('starts full at burst, refills fractionally at L/W and never exceeds the burst', async () => {
        // r = 3 tokens per second, B = 5
        const l = one({ algorithm: 'token-bucket', limit: 3, window: '1s', burst: 5 });
        const first = await burst(l, 6);
        expect(first.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
        expect(first[4]?.rules[0]?.remaining).toBe(0);
        // One token takes 333.3 ms: exactly 334 whole ms.
        expect(first[5]?.retryAfterMs).toBe(334);
        clock.set(START + 500); // 1.5 tokens
        expect((await l.consume({})).allowed).toBe(true);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        // 0.5 token left: 0.5 more takes 166.7 ms → 167
        expect(d.retryAfterMs).toBe(167);
        await expectExactRetry(l, d, {}, undefined, 'fractional');
        // Idle for an hour: the bucket holds B, not more.
        clock.set(START + 3_600_000);
        const after = await burst(l, 6);
        expect(after.filter((x) => x.allowed)).toHaveLength(5);
      });

      // The state is kept across a change of burst: the bucket refills from where it was, at
      // its rate, also past the time it would have been full at the old burst.
      it('a burst raised by update: an emptied bucket refills at its rate, not to the new burst at once', async () => {
        const l = one({ algorithm: 'token-bucket', limit: 2, window: '1m' });
        await burst(l, 2);
        l.update('r', { burst: 10 });
        clock.set(START + 60_001);
        expect((await l.get('r', 'a')).remaining).toBe(2);
        expect((await burst(l, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
      });

      it('a burst raised per request (a value of the request): the same', async () => {
        const l = one({ algorithm: 'token-bucket', limit: 2, window: '1m', burst: (req) => (req.n === undefined ? 2 : 10) });
        await burst(l, 2);
        clock.set(START + 60_001);
        expect((await burst(l, 3, { n: 1 })).map((d) => d.allowed)).toEqual([true, true, false]);
      });

      // A lower burst caps what can be taken; it does not reset the bucket. A read under it
      // (peek, get) writes nothing, so the tokens stored stay what the next decision sees.
      describe('bug: a burst lowered then raised again: a read under the lower burst dropped the fuller bucket on Redis (a fresh, full one next)', () => {
        const lowered: readonly [string, (l: Limiter<ContractReq>) => Promise<unknown>][] = [
          ['peek', (l) => l.peek({})],
          ['get', (l) => l.get('r', 'a')],
          ['a refused request', (l) => l.consume({}, { cost: 2 })],
        ];
        for (const [label, read] of lowered) {
          it(`update, then ${label}`, async () => {
            // 1 token per 30 s; 8 of 10 taken: 2 left, full again 240 s later.
            const l = one({ algorithm: 'token-bucket', limit: 2, window: '1m', burst: 10 });
            await l.consume({}, { cost: 8 });
            l.update('r', { burst: 1 });
            clock.advance(1);
            await read(l);
            l.update('r', { burst: 10 });
            clock.advance(1);
            expect((await burst(l, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
          });
        }

        it('a burst per request', async () => {
          const l = one({ algorithm: 'token-bucket', limit: 2, window: '1m', burst: (req) => (req.n === 1 ? 1 : 10) });
          await l.consume({}, { cost: 8 });
          clock.advance(1);
          expect((await l.peek({ n: 1 })).rules[0]).toMatchObject({ allowed: true, remaining: 0 });
          clock.advance(1);
          expect((await burst(l, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
        });
      });

      it("a burst lowered by update, then the clock behind the bucket: decided at the bucket's time", async () => {
        const l = one({ algorithm: 'token-bucket', limit: 6, window: '1m' });
        await l.consume({}, { cost: 2 });
        l.update('r', { burst: 2 });
        clock.set(START - 1000);
        // 2 tokens at START (4 capped at the new burst), both taken: full again 20 s after
        // START (a token per 10 s), not 20 s after now.
        const d = await l.consume({}, { cost: 2 });
        expect(d.rules[0]).toMatchObject({ allowed: true, remaining: 0, resetMs: 21_000 });
      });
    });

    describe('leaky-bucket', () => {
      it('meter: a level draining at r with capacity B; decisions are immediate', async () => {
        // T = 100 ms, B = 10
        const l = one({ algorithm: 'leaky-bucket', limit: 10, window: '1s' });
        const first = await burst(l, 11);
        expect(first.filter((d) => d.allowed)).toHaveLength(10);
        expect(first.every((d) => d.delayMs === 0)).toBe(true);
        expect(first[10]?.retryAfterMs).toBe(100);
        clock.set(START + 250); // level 7.5
        const next = await burst(l, 3);
        expect(next.map((d) => d.allowed)).toEqual([true, true, false]);
        // level 9.5: room for 1 at level 9
        expect(next[2]?.retryAfterMs).toBe(50);
      });

      it('bug: with a fractional interval (7/s, 6/s, 3 per 10 s) a burst of B at one instant got B - 1 (float rounding); the meter admits B, the queue Q', async () => {
        for (const [limit, window] of [
          [7, 1000],
          [6, 1000],
          [3, 10_000],
        ] as const) {
          const meter = one({ algorithm: 'leaky-bucket', limit, window });
          const ds = await burst(meter, limit + 1, { k: `m${limit}` });
          expect(ds.map((d) => d.allowed).filter(Boolean), `meter ${limit}/${window}`).toHaveLength(limit);
          expect(ds[limit - 1]?.rules[0]?.remaining, `meter ${limit}/${window}: remaining after the last`).toBe(0);
          const queue = limiter([{ name: `q${limit}`, key: byKey, algorithm: 'leaky-bucket', mode: 'queue', limit, window, queue: limit }]);
          const qs = await burst(queue, limit + 1, { k: `q${limit}` });
          expect(qs.map((d) => d.allowed).filter(Boolean), `queue ${limit}/${window}`).toHaveLength(limit);
        }
      });

      it('meter admits exactly what a token bucket with the same B and r admits, for a fractional interval too (7/s, burst 4, costs 1 to 3)', async () => {
        const rule = { rate: '7/s' as const, burst: 4, cost: (req: ContractReq) => req.n ?? 1 };
        const leaky = limiter([{ name: 'leaky', key: byKey, algorithm: 'leaky-bucket', ...rule }]);
        const token = limiter([{ name: 'token', key: (req) => `${req.k ?? ''}t`, algorithm: 'token-bucket', ...rule }]);
        const rnd = prng(4242);
        let admitted = 0;
        for (let step = 0; step < 300; step++) {
          // Often at the same instant (bursts), mostly short gaps, sometimes a long pause.
          const p = rnd();
          clock.advance(p < 0.3 ? 0 : p < 0.8 ? Math.floor(rnd() * 60) : Math.floor(rnd() * 700));
          const n = 1 + Math.floor(rnd() * 3);
          const a = await leaky.consume({ n });
          const b = await token.consume({ n });
          expect(a.allowed, `step ${step} cost ${n}`).toBe(b.allowed);
          if (a.allowed) admitted++;
        }
        expect(admitted, 'both refused and admitted along the way').toBeGreaterThan(50);
        expect(admitted).toBeLessThan(300);
      });

      it('queue: SPEC example, 9 at once, Q=6, T=0.5 s → delays 500..3000 and three rejected', async () => {
        const l = one({ algorithm: 'leaky-bucket', mode: 'queue', limit: 2, window: '1s', queue: 6 });
        const ds = await burst(l, 9);
        expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, true, false, false, false]);
        expect(ds.slice(0, 6).map((d) => d.delayMs)).toEqual([500, 1000, 1500, 2000, 2500, 3000]);
        for (const d of ds.slice(6)) {
          expect(d.delayMs).toBe(0);
          expect(d.rejectedBy).toEqual(['r']);
          expect(d.retryAfterMs).toBe(500);
        }
        await expectExactRetry(l, ds[8] as Decision, {}, undefined, 'queue');
        // Once the queue has drained, a request leaves one interval after it arrives.
        clock.set(START + 10_000);
        expect((await l.consume({})).delayMs).toBe(500);
      });
    });

    describe('retryAfterMs is exact for every algorithm', () => {
      for (const c of EXACTNESS_CASES) {
        it(c.label, async () => {
          const l = one({ ...c.rule, cost: (req) => req.n ?? 1 });
          const rnd = prng(c.label.length * 7919 + 17);
          let verified = 0;
          for (let step = 0; step < 160; step++) {
            // Mostly short gaps so the limit is reached; sometimes a longer pause.
            const gap = rnd() < 0.85 ? Math.floor(rnd() * (c.span / 8)) : Math.floor(rnd() * c.span);
            clock.advance(gap);
            const n = 1 + Math.floor(rnd() * c.maxCost);
            const d = await l.consume({ n });
            if (!d.allowed && d.rules[0]?.reason !== 'cost_exceeds_limit') {
              await expectExactRetry(l, d, { n }, undefined, `${c.label} step ${step} cost ${n}`);
              verified++;
            }
          }
          expect(verified, 'the sequence must reach the limit often').toBeGreaterThan(10);
        });
      }

      for (const c of ALGORITHM_CASES) {
        it(`${c.label}: with one unit left, a cost-3 and a cost-1 request each retry exactly`, async () => {
          const l = one(c.rule);
          // Separate keys: a peek far ahead may let a store expire the state, and going
          // back afterwards would then (rightly) find a fresh key.
          await burst(l, 4, { k: 'c3' });
          const d3 = await l.peek({ k: 'c3' }, { cost: 3 });
          await expectExactRetry(l, d3, { k: 'c3' }, 3, `${c.label} cost 3`);
          clock.set(START);
          await burst(l, 5, { k: 'c1' });
          const d1 = await l.consume({ k: 'c1' });
          await expectExactRetry(l, d1, { k: 'c1' }, 1, `${c.label} cost 1`);
          expect(d3.retryAfterMs).toBeGreaterThan(0);
        });
      }
    });

    describe('resetMs is the time until the full quota is back', () => {
      it('bug: sliding-window: one request 50 s into a 60 s window reported resetMs 70 s while a full-quota request passed 10.001 s later', async () => {
        const l = one({ algorithm: 'sliding-window', limit: 10, window: '60s' });
        clock.set(START + 50_000);
        const d = await l.consume({});
        expect(d.rules[0]?.resetMs).toBe(10_001);
        clock.set(START + 50_000 + 10_000);
        expect((await l.peek({}, { cost: 10 })).allowed).toBe(false);
        clock.set(START + 50_000 + 10_001);
        expect((await l.peek({}, { cost: 10 })).allowed).toBe(true);
      });

      for (const c of EXACTNESS_CASES) {
        it(`${c.label}: at now + resetMs a request of the full quota passes, at now + resetMs - 1 it does not`, async () => {
          // The full quota: the burst of a bucket, the places of a queue, else the limit.
          const full = (c.rule.burst ?? c.rule.queue ?? c.rule.limit ?? Number(String(c.rule.rate).split('/')[0])) as number;
          const l = one({ ...c.rule, cost: (req) => req.n ?? 1 });
          const rnd = prng(c.label.length * 104_729 + 3);
          let waited = 0;
          let restored = 0;
          let key = 0;
          for (let step = 0; step < 100; step++) {
            const gap = rnd() < 0.85 ? Math.floor(rnd() * (c.span / 8)) : Math.floor(rnd() * c.span);
            clock.advance(gap);
            const now = clock.now();
            const req = { k: `k${key}` };
            const d = await l.consume({ ...req, n: 1 + Math.floor(rnd() * c.maxCost) });
            const resetMs = d.rules[0]?.resetMs as number;
            const what = `${c.label} step ${step}: resetMs ${resetMs}`;
            expect(Number.isInteger(resetMs) && resetMs >= 0, what).toBe(true);
            if (resetMs > 0) {
              waited++;
              clock.set(now + resetMs - 1);
              expect((await l.peek(req, { cost: full })).allowed, `${what}: not yet at +resetMs - 1`).toBe(false);
            }
            // At +resetMs the state may be seen as expired, and a store drops such a state
            // when it reads it: the sequence then goes on with a fresh key.
            if (rnd() < 0.25) {
              clock.set(now + resetMs);
              expect((await l.peek(req, { cost: full })).allowed, `${what}: full quota at +resetMs`).toBe(true);
              restored++;
              key++;
            }
            clock.set(now);
          }
          expect(restored).toBeGreaterThan(10);
          expect(waited, 'most decisions leave something to wait for').toBeGreaterThan(40);
        });
      }
    });

    describe('stacks', () => {
      it('all-or-nothing: when one rule rejects, the others consume nothing', async () => {
        const l = limiter([
          { name: 'small', key: byKey, algorithm: 'fixed-window', limit: 2, window: '1m' },
          { name: 'log', key: () => 'log', algorithm: 'sliding-log', limit: 5, window: '1m' },
          { name: 'win', key: () => 'win', algorithm: 'sliding-window', limit: 5, window: '1m' },
          { name: 'tb', key: () => 'tb', algorithm: 'token-bucket', limit: 5, window: '1m' },
          { name: 'gcra', key: () => 'gcra', algorithm: 'leaky-bucket', limit: 5, window: '1m' },
          { name: 'q', key: () => 'q', algorithm: 'leaky-bucket', mode: 'queue', limit: 5, window: '1m' },
        ]);
        await burst(l, 2);
        for (let i = 0; i < 5; i++) {
          const d = await l.consume({});
          expect(d.allowed).toBe(false);
          expect(d.rejectedBy).toEqual(['small']);
          expect(d.delayMs).toBe(0);
        }
        // Another key passes "small", so the shared rules show what was consumed: only 2.
        const p = await l.peek({ k: 'other' });
        expect(p.allowed).toBe(true);
        const remaining = Object.fromEntries(p.rules.map((r) => [r.name, r.remaining]));
        // remaining after this request: 5 - 2 consumed - 1
        expect(remaining).toEqual({ small: 1, log: 2, win: 2, tb: 2, gcra: 2, q: 2 });
        const d = await l.consume({ k: 'other' });
        expect(d.allowed).toBe(true);
        // Two 12 s intervals consumed before, this one third.
        expect(d.rules.find((r) => r.name === 'q')?.delayMs).toBe(36_000);
        expect(d.delayMs).toBe(36_000);
      });

      it('a refused stack reports the admitting rules as untouched (their remaining counts nothing consumed)', async () => {
        const l = limiter([
          { name: 'small', key: byKey, algorithm: 'fixed-window', limit: 1, window: '1m' },
          { name: 'fw', key: () => 'fw', algorithm: 'fixed-window', limit: 8, window: '1m' },
          { name: 'log', key: () => 'log', algorithm: 'sliding-log', limit: 8, window: '1m' },
          { name: 'win', key: () => 'win', algorithm: 'sliding-window', limit: 8, window: '1m' },
          { name: 'tb', key: () => 'tb', algorithm: 'token-bucket', limit: 8, window: '1m' },
          { name: 'gcra', key: () => 'gcra', algorithm: 'leaky-bucket', limit: 8, window: '1m' },
        ]);
        expect((await l.consume({}, { cost: 1 })).allowed).toBe(true);
        // 8 - 1 consumed = 7 left in each shared rule; a refused cost-2 request leaves them at 7.
        const d = await l.consume({}, { cost: 1 });
        expect(d.allowed).toBe(false);
        expect(d.rejectedBy).toEqual(['small']);
        const remaining = Object.fromEntries(d.rules.filter((r) => r.allowed).map((r) => [r.name, r.remaining]));
        expect(remaining).toEqual({ fw: 7, log: 7, win: 7, tb: 7, gcra: 7 });
      });

      it('retryAfterMs is the maximum over the rejecting rules, and rejectedBy names all of them', async () => {
        const l = limiter([
          { name: 'a', key: byKey, algorithm: 'fixed-window', limit: 1, window: '1s' },
          { name: 'b', key: byKey, algorithm: 'fixed-window', limit: 1, window: '10s' },
          { name: 'c', key: byKey, algorithm: 'fixed-window', limit: 5, window: '10s' },
        ]);
        expect((await l.consume({})).allowed).toBe(true);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.rejectedBy).toEqual(['a', 'b']);
        expect(d.retryAfterMs).toBe(10_000);
        expect(d.rules.map((r) => r.retryAfterMs)).toEqual([1000, 10_000, 0]);
        await expectExactRetry(l, d, {}, undefined, 'stack');
      });

      it('a rule whose key is undefined or null does not apply', async () => {
        const l = limiter([
          { name: 'user', key: (req) => req.user, algorithm: 'fixed-window', limit: 1, window: '1m' },
          { name: 'all', key: () => 'all', algorithm: 'fixed-window', limit: 10, window: '1m' },
        ]);
        const anon = await burst(l, 3, {});
        expect(anon.every((d) => d.allowed)).toBe(true);
        expect(anon[0]?.rules.map((r) => r.name)).toEqual(['all']);
        const nulls = await burst(l, 2, { user: null });
        expect(nulls.every((d) => d.allowed && d.rules.length === 1)).toBe(true);
        const u = await burst(l, 2, { user: 'u1' });
        expect(u.map((d) => d.allowed)).toEqual([true, false]);
        expect(u[1]?.rejectedBy).toEqual(['user']);
        // 3 + 2 anonymous + 1 user admitted, and this one
        expect((await l.peek({})).rules[0]?.remaining).toBe(3);
      });

      it('groups: rules of different limiters with the same group share one counter', async () => {
        const csv = limiter([{ name: 'csv', group: 'export', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' }]);
        const pdf = limiter([{ name: 'pdf', group: 'export', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' }]);
        const other = limiter([{ name: 'other', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' }]);
        expect((await burst(csv, 2)).every((d) => d.allowed)).toBe(true);
        expect((await pdf.consume({})).allowed).toBe(true);
        expect((await pdf.consume({})).rejectedBy).toEqual(['pdf']);
        expect((await csv.consume({})).rejectedBy).toEqual(['csv']);
        expect((await other.consume({})).allowed).toBe(true);
      });

      it('dryRun rules decide and count but never refuse', async () => {
        const l = limiter([
          { name: 'shadow', key: byKey, algorithm: 'fixed-window', limit: 1, window: '1m', dryRun: true },
          { name: 'real', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' },
        ]);
        const ds = await burst(l, 4);
        expect(ds.map((d) => d.allowed)).toEqual([true, true, true, false]);
        expect(ds[1]?.dryRunRejectedBy).toEqual(['shadow']);
        expect(ds[1]?.rejectedBy).toEqual([]);
        expect(ds[1]?.retryAfterMs).toBe(0);
        expect(ds[1]?.rules[0]).toMatchObject({ name: 'shadow', allowed: false, dryRun: true });
        expect(ds[3]?.rejectedBy).toEqual(['real']);
      });
    });

    describe('weighted cost', () => {
      it('static cost: remaining is reported in the rule’s own units', async () => {
        const l = one({ algorithm: 'sliding-window', limit: 5, window: '1m', cost: 2 });
        const ds = await burst(l, 3);
        expect(ds.map((d) => d.allowed)).toEqual([true, true, false]);
        expect(ds.map((d) => d.rules[0]?.remaining)).toEqual([3, 1, 1]);
      });

      it('cost function: the request decides its own cost', async () => {
        const l = one({ algorithm: 'token-bucket', limit: 10, window: '10s', cost: (req) => req.n ?? 1 });
        expect((await l.consume({ n: 7 })).rules[0]?.remaining).toBe(3);
        const d = await l.consume({ n: 4 });
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(1000);
        expect((await l.consume({ n: 3 })).allowed).toBe(true);
      });

      for (const c of ALGORITHM_CASES) {
        it(`${c.label}: a cost above what the rule can ever admit → cost_exceeds_limit, retryAfterMs 0, nothing consumed`, async () => {
          const l = limiter([
            { name: 'r', key: byKey, ...c.rule, cost: (req) => req.n ?? 1 },
            { name: 'other', key: byKey, algorithm: 'fixed-window', limit: 100, window: '1m' },
          ]);
          const d = await l.consume({ n: 6 });
          expect(d.allowed).toBe(false);
          expect(d.rejectedBy).toEqual(['r']);
          expect(d.retryAfterMs).toBe(0);
          expect(d.rules[0]?.reason).toBe('cost_exceeds_limit');
          const p = await l.peek({ n: 5 });
          expect(p.allowed).toBe(true);
          // remaining after this request: nothing was consumed before it
          expect(p.rules[1]?.remaining).toBe(99);
        });
      }
    });

    describe('blockFor and countRejected', () => {
      it('blockFor: once rejected, the key stays rejected for the block, then recovers exactly', async () => {
        const l = one({ algorithm: 'fixed-window', limit: 2, window: '1s', blockFor: '10s' });
        await burst(l, 2);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(10_000);
        clock.set(START + 5000);
        const blocked = await l.consume({});
        expect(blocked.allowed).toBe(false);
        expect(blocked.rules[0]?.reason).toBe('blocked');
        expect(blocked.retryAfterMs).toBe(5000);
        clock.set(START);
        await expectExactRetry(l, d, {}, undefined, 'blockFor');
        // Another key is not blocked.
        expect((await l.consume({ k: 'b' })).allowed).toBe(true);
      });

      it('countRejected: a rejected request counts, so retrying while refused pushes recovery back', async () => {
        const counted = one({ algorithm: 'sliding-log', limit: 1, window: '1s', countRejected: true });
        const plain = limiter([{ name: 'p', key: byKey, algorithm: 'sliding-log', limit: 1, window: '1s' }]);
        for (const l of [counted, plain]) {
          clock.set(START);
          expect((await l.consume({})).allowed).toBe(true);
          clock.set(START + 500);
          expect((await l.consume({})).allowed).toBe(false);
        }
        clock.set(START + 1000);
        expect((await plain.consume({})).allowed).toBe(true);
        expect((await counted.consume({})).allowed).toBe(false);
        clock.set(START + 1500);
        expect((await counted.consume({})).allowed).toBe(false);
      });
    });

    describe('refunds', () => {
      for (const c of ALGORITHM_CASES) {
        it(`${c.label}: after a refund the unit is available again`, async () => {
          const l = one(c.rule);
          const ds = await burst(l, 5);
          expect(ds.every((d) => d.allowed)).toBe(true);
          const rejected = await l.consume({});
          expect(rejected.allowed).toBe(false);
          await l.refund({}, rejected); // a rejected decision consumed nothing: no-op
          expect((await l.peek({})).allowed).toBe(false);
          await l.refund({}, ds[4] as Decision);
          const again = await l.consume({});
          expect(again.allowed).toBe(true);
          expect((await l.consume({})).allowed).toBe(false);
        });
      }

      it('a refund gives back exactly the decision’s cost, in every rule of the stack', async () => {
        const l = limiter([
          { name: 'a', key: byKey, algorithm: 'sliding-window', limit: 10, window: '1m', cost: (r) => r.n ?? 1 },
          { name: 'b', key: () => 'b', algorithm: 'token-bucket', limit: 10, window: '1m', cost: (r) => r.n ?? 1 },
        ]);
        await l.consume({ n: 3 });
        const d = await l.consume({ n: 4 });
        clock.advance(10);
        await l.refund({}, d);
        const p = await l.peek({});
        // 3 still consumed, and the peeked request's own unit
        expect(p.rules[0]?.remaining).toBe(6);
        expect(p.rules[1]?.remaining).toBe(6);
      });
    });

    describe('refunds never over-credit', () => {
      const BUCKETS: readonly { label: string; rule: Omit<Rule<ContractReq>, 'name'>; B: number; L: number; W: number }[] = [
        { label: 'token-bucket 3/s burst 4', rule: { algorithm: 'token-bucket', rate: '3/s', burst: 4 }, B: 4, L: 3, W: 1000 },
        { label: 'leaky meter 4/s burst 3', rule: { algorithm: 'leaky-bucket', rate: '4/s', burst: 3 }, B: 3, L: 4, W: 1000 },
        { label: 'leaky queue 4/s Q=3', rule: { algorithm: 'leaky-bucket', mode: 'queue', rate: '4/s', queue: 3 }, B: 3, L: 4, W: 1000 },
      ];

      for (const c of BUCKETS) {
        it(`bug: ${c.label}: five long requests refunded after the bucket refilled and drained again let five more through at one instant`, async () => {
          const l = limiter([{ name: 'r', key: byKey, ...c.rule, ...(c.rule.mode === 'queue' ? { queue: 5 } : { burst: 5 }) }]);
          const long = await burst(l, 5);
          expect(long.every((d) => d.allowed)).toBe(true);
          // Refilled (drained) in full, then taken again by five others.
          clock.advance(5 * Math.ceil(c.W / c.L));
          expect((await burst(l, 5)).every((d) => d.allowed)).toBe(true);
          for (const d of long) await l.refund({}, d);
          // The long requests weigh nothing any more: the bucket is as the five others left it.
          const after = await burst(l, 5);
          expect(after.filter((d) => d.allowed)).toHaveLength(0);
          // A refund right after its decision still gives back all of it.
          clock.advance(5 * Math.ceil(c.W / c.L));
          const d = await l.consume({ k: 'now' });
          await l.refund({ k: 'now' }, d);
          expect((await burst(l, 5, { k: 'now' })).every((x) => x.allowed)).toBe(true);
        });

        it(`${c.label}: under any sequence of consumes and refunds no interval T admits more than B + r·T counted units`, async () => {
          let run = 0;
          // Instants apart by nothing, a little, or long enough to refill in full; at each, a
          // few refunds of earlier decisions, then a few consumes.
          const instant = fc.record({
            gap: fc.oneof(fc.constant(0), fc.nat({ max: 300 }), fc.nat({ max: 3000 })),
            refunds: fc.array(fc.nat(), { maxLength: 3 }),
            costs: fc.array(fc.integer({ min: 1, max: c.B }), { maxLength: c.B + 1 }),
          });
          await fc.assert(
            fc.asyncProperty(fc.array(instant, { minLength: 1, maxLength: 12 }), async (instants) => {
              const req = { k: `p${++run}` };
              const l = one({ ...c.rule, cost: (x) => x.n ?? 1 });
              const admitted: { at: number; cost: number; d: Decision; refunded: boolean }[] = [];
              clock.set(START);
              for (const st of instants) {
                clock.advance(st.gap);
                for (const pick of st.refunds) {
                  const open = admitted.filter((a) => !a.refunded);
                  const a = open[pick % Math.max(1, open.length)];
                  if (a === undefined) continue;
                  a.refunded = true;
                  await l.refund(req, a.d);
                }
                for (const cost of st.costs) {
                  const d = await l.consume({ ...req, n: cost });
                  if (d.allowed) admitted.push({ at: clock.now(), cost, d, refunded: false });
                }
              }
              // Counted: admitted and not refunded. For every interval [s, e] between two of
              // them: units·W <= B·W + L·(e - s), i.e. units <= B + r·T, in integers.
              const counted = admitted.filter((a) => !a.refunded);
              for (let i = 0; i < counted.length; i++) {
                let units = 0;
                for (let j = i; j < counted.length; j++) {
                  const x = counted[j] as (typeof counted)[number];
                  units += x.cost;
                  const T = x.at - (counted[i] as (typeof counted)[number]).at;
                  expect(units * c.W, `${units} units in ${T} ms`).toBeLessThanOrEqual(c.B * c.W + c.L * T);
                }
              }
            }),
            { numRuns: 100 },
          );
        });
      }

      for (const c of ALGORITHM_CASES) {
        // The window algorithms lost it (the buckets did not: they are checked alike).
        const bucket = c.rule.algorithm === 'token-bucket' || c.rule.algorithm === 'leaky-bucket';
        const title = bucket
          ? 'a refund after the clock stepped back gives the unit back'
          : 'bug: a refund after the clock stepped back was lost';
        it(`${c.label}: ${title}`, async () => {
          const l = one(c.rule);
          // 100 ms into a window, then back 200 ms into the one before.
          clock.set(START + 1100);
          expect((await burst(l, 2)).every((d) => d.allowed)).toBe(true);
          clock.set(START + 900);
          // Admitted until the limit, at the earlier reading.
          const back = await burst(l, 5);
          const d = back.filter((x) => x.allowed).pop() as Decision;
          expect(d?.allowed).toBe(true);
          expect(back[4]?.allowed).toBe(false);
          await l.refund({}, d);
          expect((await l.consume({})).allowed, 'the refunded unit is back').toBe(true);
          expect((await l.consume({})).allowed).toBe(false);
        });
      }
    });

    describe('reset, peek, expiry', () => {
      for (const c of ALGORITHM_CASES) {
        it(`${c.label}: reset forgets the key`, async () => {
          const l = one(c.rule);
          await burst(l, 6);
          expect((await l.peek({})).allowed).toBe(false);
          await l.reset({});
          const d = await l.consume({});
          expect(d.allowed).toBe(true);
          expect(d.rules[0]?.remaining).toBe(4);
        });

        it(`${c.label}: peek never changes state`, async () => {
          // countRejected makes a rejected consume write, so a peek that wrote would show.
          const l = one(c.rule.mode === 'queue' ? c.rule : { ...c.rule, countRejected: true });
          const rnd = prng(99);
          let rejected = 0;
          for (let i = 0; i < 40; i++) {
            clock.advance(Math.floor(rnd() * 150));
            for (let j = 0; j < 3; j++) await l.peek({ k: 'x' }, { cost: 1 + j });
            const a = await l.consume({ k: 'x' });
            const b = await l.consume({ k: 'y' });
            if (!a.allowed) rejected++;
            // The peeked key and an un-peeked twin with the same history decide alike.
            expect(figures(a), `step ${i}`).toEqual(figures(b));
          }
          expect(rejected).toBeGreaterThan(0);
        });

        it(`${c.label}: after resetMs the key decides like a fresh one`, async () => {
          const l = one(c.rule);
          await burst(l, 3);
          clock.advance(201);
          const last = await l.consume({});
          const resetMs = last.rules[0]?.resetMs ?? 0;
          expect(resetMs).toBeGreaterThan(0);
          clock.advance(resetMs);
          const used = await l.consume({});
          const fresh = await l.consume({ k: 'fresh' });
          expect(figures(used)).toEqual(figures(fresh));
        });
      }
    });

    describe('time going backwards', () => {
      for (const c of ALGORITHM_CASES) {
        it(`${c.label}: never admits more than at the latest time, retryAfterMs stays exact, state recovers`, async () => {
          const l = one(c.rule);
          const t0 = START + 5000;
          clock.set(t0);
          await burst(l, 3, { k: 'back' });
          await burst(l, 3, { k: 'twin' });
          clock.set(t0 - 2500);
          const back = await burst(l, 4, { k: 'back' });
          clock.set(t0);
          const twin = await burst(l, 4, { k: 'twin' });
          const admitted = (ds: Decision[]) => ds.filter((d) => d.allowed).length;
          expect(admitted(back)).toBeLessThanOrEqual(admitted(twin));
          for (const d of back) {
            for (const r of d.rules) {
              expect(Number.isFinite(r.remaining) && r.remaining >= 0 && r.resetMs >= 0 && r.retryAfterMs >= 0).toBe(true);
            }
          }
          // Exact retry from the earlier clock reading.
          clock.set(t0 - 2500);
          const rej = await l.consume({ k: 'back' });
          expect(rej.allowed).toBe(false);
          await expectExactRetry(l, rej, { k: 'back' }, undefined, `${c.label} backwards`);
          // Long after, the key decides like a fresh one.
          clock.set(t0 + 3_600_000);
          const d = await l.consume({ k: 'back' });
          const fresh = await l.consume({ k: 'never-seen' });
          expect(figures(d)).toEqual(figures(fresh));
        });
      }
    });

    describe('a clock that gives no time', () => {
      for (const c of ALGORITHM_CASES) {
        it(`bug: ${c.label}: a clock returning NaN, Infinity or a non-number admitted everything (or errored every Redis call)`, async () => {
          const l = limiter([{ name: 'r', key: byKey, ...c.rule, limit: 3 }]);
          const admittedBefore = await l.consume({ k: 'good' });
          expect(admittedBefore.allowed).toBe(true);
          for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '5', undefined, null]) {
            const what = String(bad);
            const viaLimiter = limiter([{ name: 'r', key: byKey, ...c.rule, limit: 3 }], { now: () => bad as number });
            // The limiter's clock, and the store's own clock when the limiter has none.
            clock.set(bad as number);
            const viaStore = createLimiter<ContractReq>({ rules: [{ name: 'r', key: byKey, ...c.rule, limit: 3 }], store, prefix });
            for (const lim of [viaLimiter, viaStore]) {
              for (let i = 0; i < 20; i++) {
                await expect(lim.consume({ k: 'bad' }), what).rejects.toMatchObject({ code: 'TG_INVALID_TIME' });
              }
              await expect(lim.peek({ k: 'bad' }), what).rejects.toMatchObject({ code: 'TG_INVALID_TIME' });
              await expect(lim.refund({ k: 'good' }, admittedBefore), what).rejects.toMatchObject({ code: 'TG_INVALID_TIME' });
            }
            clock.set(START);
          }
          // Nothing was written or given back: the good key still holds its one request, the
          // bad key is untouched.
          expect((await l.peek({ k: 'good' })).rules[0]?.remaining).toBe(1);
          expect((await l.peek({ k: 'bad' })).rules[0]?.remaining).toBe(2);
        });
      }
    });

    describe('calendar quotas', () => {
      it('per day: resets at UTC midnight', async () => {
        const l = limiter([{ name: 'q', key: byKey, quota: 3, per: 'day' }]);
        clock.set(Date.UTC(2026, 2, 10, 23, 59, 59, 999) - 5000);
        await burst(l, 3);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.retryAfterMs).toBe(5001);
        await expectExactRetry(l, d, {}, undefined, 'day');
        expect(d.rules[0]?.windowMs).toBe(86_400_000);
      });

      for (const [label, now, next] of [
        ['February of a common year', Date.UTC(2027, 1, 15, 12), Date.UTC(2027, 2, 1)],
        ['February of a leap year', Date.UTC(2028, 1, 28, 23), Date.UTC(2028, 2, 1)],
        ['a 31-day month from its first instant', Date.UTC(2027, 0, 1), Date.UTC(2027, 1, 1)],
        ['December into January', Date.UTC(2026, 11, 31, 23, 59, 59, 999), Date.UTC(2027, 0, 1)],
      ] as const) {
        it(`per month: ${label}`, async () => {
          const l = limiter([{ name: 'q', key: byKey, quota: 2, per: 'month' }]);
          clock.set(now);
          await burst(l, 2);
          const d = await l.consume({});
          expect(d.allowed).toBe(false);
          expect(d.retryAfterMs).toBe(next - now);
          await expectExactRetry(l, d, {}, undefined, label);
          expect((await l.consume({})).rules[0]?.remaining).toBe(1);
        });
      }
    });

    // Tiers, values per request and update (values-contract.ts), on this store.
    valuesContract(() => ({ clock, store, prefix }));
  });
}
