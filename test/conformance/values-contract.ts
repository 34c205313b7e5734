/**
 * Tiers, values per request and `limiter.update`, on any store: part of the store
 * conformance suite (store-contract.ts calls it), so MemoryStore and RedisStore
 * (standalone and Cluster, every client) run the same cases through the public limiter.
 *
 * The properties pin what a change of limit (or burst) does to the stored state: no
 * sequence of changes admits more than the largest values in force allow, per algorithm:
 * - fixed-window: per window, at most the largest limit of the decisions made in it;
 * - sliding-log: in any interval of length W, at most the largest limit decided in it;
 * - sliding-window: per clock-aligned window, at most the largest limit decided in it;
 * - token-bucket and leaky-bucket (meter and queue): over the admissions in any interval
 *   [a, b], at most B + r·(b - a) units with the largest burst B and rate r = L/W of the
 *   decisions in it;
 * and moving back down never restores a budget.
 */
import { createLimiter, type Decision, type Limiter, type ManualClock, MemoryStore, type Rule, type Store } from '@tollgate/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/** The request of these cases: the values its functions read. */
interface VReq {
  k: string;
  L: number;
  B?: number;
  plan?: unknown;
  n?: number;
}

export interface ValuesContext {
  clock: ManualClock;
  store: Store;
  prefix: string;
}

const W = 1000;

/** Every algorithm with a function-valued limit (and a function-valued burst for the token bucket). */
const DYNAMIC: readonly { label: string; rule: Omit<Rule<VReq>, 'name'>; bucket: boolean }[] = [
  { label: 'fixed-window clock', rule: { algorithm: 'fixed-window', window: W }, bucket: false },
  { label: 'fixed-window first-request', rule: { algorithm: 'fixed-window', align: 'first-request', window: W }, bucket: false },
  { label: 'sliding-log', rule: { algorithm: 'sliding-log', window: W }, bucket: false },
  { label: 'sliding-window', rule: { algorithm: 'sliding-window', window: W }, bucket: false },
  { label: 'token-bucket', rule: { algorithm: 'token-bucket', window: W }, bucket: true },
  {
    label: 'token-bucket, burst per request',
    rule: { algorithm: 'token-bucket', window: W, burst: (r: VReq) => r.B ?? r.L },
    bucket: true,
  },
  { label: 'leaky-bucket meter', rule: { algorithm: 'leaky-bucket', window: W }, bucket: true },
  { label: 'leaky-bucket queue', rule: { algorithm: 'leaky-bucket', mode: 'queue', window: W }, bucket: true },
];

/** Limits that divide W, so a leaky bucket's interval W/L is a whole number of ms. */
const LIMITS = [1, 2, 4, 5, 8, 10, 20, 25];

interface Step {
  /** ms to advance before the decision. */
  dt: number;
  L: number;
  B: number;
  cost: number;
}

interface Seen {
  t: number;
  L: number;
  B: number;
  cost: number;
  allowed: boolean;
}

/** Checks the bound of `label` over the decisions `seen` (in time order). */
function checkBound(label: string, seen: readonly Seen[]): void {
  const admitted = seen.filter((s) => s.allowed);
  if (label.startsWith('fixed-window clock') || label.startsWith('sliding-window')) {
    const windows = new Map<number, { used: number; max: number }>();
    for (const s of seen) {
      const k = s.t - (s.t % W);
      const w = windows.get(k) ?? { used: 0, max: 0 };
      w.max = Math.max(w.max, s.L);
      if (s.allowed) w.used += s.cost;
      windows.set(k, w);
    }
    for (const [k, w] of windows) expect(w.used, `${label}: window at ${k}`).toBeLessThanOrEqual(w.max);
    return;
  }
  if (label.startsWith('fixed-window first-request')) {
    // Windows open at an admission at or after the previous window's end.
    let end = Number.NEGATIVE_INFINITY;
    let used = 0;
    let max = 0;
    for (const s of seen) {
      if (s.allowed && s.t >= end) {
        end = s.t + W;
        used = 0;
        max = 0;
      }
      if (s.t < end) {
        max = Math.max(max, s.L);
        if (s.allowed) used += s.cost;
        expect(used, `${label}: window ending ${end}`).toBeLessThanOrEqual(max);
      }
    }
    return;
  }
  if (label === 'sliding-log') {
    for (const a of admitted) {
      const inside = seen.filter((s) => s.t > a.t - W && s.t <= a.t);
      const used = inside.filter((s) => s.allowed).reduce((n, s) => n + s.cost, 0);
      expect(used, `${label}: (${a.t - W}, ${a.t}]`).toBeLessThanOrEqual(Math.max(...inside.map((s) => s.L)));
    }
    return;
  }
  // Buckets: every run of decisions from one admission to another (by order, not only by
  // time: decisions at one instant under a larger burst earlier do not count as in force).
  const at = seen.flatMap((s, i) => (s.allowed ? [i] : []));
  for (let i = 0; i < at.length; i++) {
    for (let j = i; j < at.length; j++) {
      const inside = seen.slice(at[i], (at[j] as number) + 1);
      const a = (inside[0] as Seen).t;
      const b = (inside[inside.length - 1] as Seen).t;
      const used = inside.filter((s) => s.allowed).reduce((n, s) => n + s.cost, 0);
      const L = Math.max(...inside.map((s) => s.L));
      const B = Math.max(...inside.map((s) => s.B));
      // In whole units scaled by W: used·W <= B·W + L·(b - a).
      expect(used * W, `${label}: [${a}, ${b}] with L ${L} B ${B}`).toBeLessThanOrEqual(B * W + L * (b - a));
    }
  }
}

/** Registers the cases; `ctx()` gives the running test's clock, store and prefix. */
export function valuesContract(ctx: () => ValuesContext): void {
  let serial = 0;
  function limiter(rules: Rule<VReq>[], extra: Partial<Parameters<typeof createLimiter<VReq>>[0]> = {}): Limiter<VReq> {
    const { clock, store, prefix } = ctx();
    return createLimiter<VReq>({ rules, store, clock, prefix, ...extra });
  }
  const byK = (r: VReq) => r.k;
  async function until(l: Limiter<VReq>, req: VReq, max = 100): Promise<number> {
    for (let i = 0; i < max; i++) if (!(await l.consume(req)).allowed) return i;
    return max;
  }

  describe('tiers', () => {
    const plans: Record<string, Rule<VReq>[]> = {
      free: [{ name: 'free', key: byK, limit: 2, window: '1m', algorithm: 'fixed-window' }],
      pro: [{ name: 'pro', key: byK, limit: 5, window: '1m', algorithm: 'fixed-window' }],
    };
    const base: Rule<VReq>[] = [{ name: 'base', key: byK, limit: 100, window: '1m', algorithm: 'fixed-window' }];

    it('the tier the function names joins the base rules: one decision, base rules first', async () => {
      const l = limiter(base, { tiers: plans, tier: (r) => r.plan as string });
      const free = await l.consume({ k: 'a', L: 0, plan: 'free' });
      expect(free.rules.map((r) => [r.name, r.limit, r.remaining])).toEqual([
        ['base', 100, 99],
        ['free', 2, 1],
      ]);
      const pro = await l.consume({ k: 'b', L: 0, plan: 'pro' });
      expect(pro.rules.map((r) => [r.name, r.limit, r.remaining])).toEqual([
        ['base', 100, 99],
        ['pro', 5, 4],
      ]);
      expect(await until(l, { k: 'a', L: 0, plan: 'free' })).toBe(1);
      expect(await until(l, { k: 'b', L: 0, plan: 'pro' })).toBe(4);
    });

    it('all or nothing: a tier rule that refuses consumes nothing from the base rules', async () => {
      const l = limiter(base, { tiers: plans, tier: () => 'free' });
      await until(l, { k: 'a', L: 0 });
      const refused = await l.consume({ k: 'a', L: 0 });
      expect(refused.rejectedBy).toEqual(['free']);
      // Two admitted, then two refusals: the base rule counted only the two.
      expect((await l.peek({ k: 'a', L: 0 })).rules[0]?.remaining).toBe(98);
    });

    it('an async tier function is awaited', async () => {
      const l = limiter(base, { tiers: plans, tier: async (r) => r.plan as string });
      const d = await l.consume({ k: 'a', L: 0, plan: 'pro' });
      expect(d.rules.map((r) => r.name)).toEqual(['base', 'pro']);
    });

    for (const bad of ['enterprise', undefined, null, 7, '__proto__', 'toString', { plan: 'pro' }]) {
      it(`a tier the function names that does not exist (${String(JSON.stringify(bad))}) is a coded error, and nothing is consumed`, async () => {
        const l = limiter(base, { tiers: plans, tier: () => bad as string });
        await expect(l.consume({ k: 'a', L: 0 })).rejects.toMatchObject({ code: 'TG_INVALID_CALLBACK_RESULT', path: 'tier' });
        const async = limiter(base, { tiers: plans, tier: async () => bad as string });
        await expect(async.consume({ k: 'a', L: 0 })).rejects.toMatchObject({ code: 'TG_INVALID_CALLBACK_RESULT' });
        const ok = limiter(base, { tiers: plans, tier: () => 'free' });
        // A peek reports what would be left after it: 99 of 100, so nothing was consumed.
        expect((await ok.peek({ k: 'a', L: 0 })).rules[0]?.remaining).toBe(99);
      });
    }

    it('tiers sharing a group keep one count: moving up keeps what was used, moving back never restores it', async () => {
      const grouped: Record<string, Rule<VReq>[]> = {
        free: [{ name: 'free', group: 'plan', key: byK, limit: 3, window: '1m', algorithm: 'sliding-window' }],
        pro: [{ name: 'pro', group: 'plan', key: byK, limit: 10, window: '1m', algorithm: 'sliding-window' }],
      };
      const l = limiter([], { tiers: grouped, tier: (r) => r.plan as string });
      expect(await until(l, { k: 'a', L: 0, plan: 'free' })).toBe(3);
      expect(await until(l, { k: 'a', L: 0, plan: 'pro' })).toBe(7);
      expect(await until(l, { k: 'a', L: 0, plan: 'free' })).toBe(0);
    });

    it('a route stack made with extend keeps the tiers, in one decision', async () => {
      const l = limiter(base, { tiers: plans, tier: () => 'free' }).extend([
        { name: 'route', key: byK, limit: 1, window: '1m', algorithm: 'fixed-window' },
      ]);
      const d = await l.consume({ k: 'a', L: 0 });
      expect(d.rules.map((r) => r.name)).toEqual(['base', 'route', 'free']);
      const refused = await l.consume({ k: 'a', L: 0 });
      expect(refused.rejectedBy).toEqual(['route']);
      expect(refused.rules.find((r) => r.name === 'free')?.remaining).toBe(1);
    });
  });

  describe('values per request', () => {
    it('decisions report the limit that was applied', async () => {
      const l = limiter([{ name: 'r', key: byK, limit: (r) => r.L, window: '1m', algorithm: 'fixed-window' }]);
      expect((await l.consume({ k: 'a', L: 10 })).rules[0]).toMatchObject({ limit: 10, remaining: 9 });
      expect((await l.consume({ k: 'a', L: 50 })).rules[0]).toMatchObject({ limit: 50, remaining: 48 });
      expect((await l.consume({ k: 'a', L: 2 })).rules[0]).toMatchObject({ limit: 2, remaining: 0, allowed: false });
      // A count above a lowered limit leaves nothing, never a negative remaining.
      expect((await l.consume({ k: 'a', L: 1 })).rules[0]).toMatchObject({ limit: 1, remaining: 0, allowed: false });
    });

    it('an async limit is awaited', async () => {
      const l = limiter([{ name: 'r', key: byK, limit: async (r) => r.L, window: '1m' }]);
      expect((await l.consume({ k: 'a', L: 3 })).rules[0]).toMatchObject({ limit: 3, remaining: 2 });
    });

    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '5', null, undefined, 2 ** 60]) {
      it(`a limit function returning ${String(bad)} is a coded error, never an admission, and the other rules consume nothing`, async () => {
        const rules: Rule<VReq>[] = [
          { name: 'base', key: byK, limit: 10, window: '1m', algorithm: 'fixed-window' },
          { name: 'r', key: byK, limit: () => bad as number, window: '1m' },
        ];
        await expect(limiter(rules).consume({ k: 'a', L: 0 })).rejects.toMatchObject({
          code: 'TG_INVALID_CALLBACK_RESULT',
          path: 'rules.r.limit',
        });
        const async: Rule<VReq>[] = [rules[0] as Rule<VReq>, { ...(rules[1] as Rule<VReq>), limit: async () => bad as number }];
        await expect(limiter(async).consume({ k: 'a', L: 0 })).rejects.toMatchObject({ code: 'TG_INVALID_CALLBACK_RESULT' });
        // What a peek would leave: 9 of 10, so nothing was consumed.
        expect((await limiter(rules.slice(0, 1)).peek({ k: 'a', L: 0 })).rules[0]?.remaining).toBe(9);
      });
    }

    it('a burst function returning a bad value is a coded error', async () => {
      const l = limiter([{ name: 'r', key: byK, algorithm: 'token-bucket', limit: 5, window: '1s', burst: () => 0 }]);
      await expect(l.consume({ k: 'a', L: 0 })).rejects.toMatchObject({ code: 'TG_INVALID_CALLBACK_RESULT', path: 'rules.r.burst' });
    });

    it('a static cost above a limit lowered per request is refused as cost_exceeds_limit', async () => {
      const l = limiter([{ name: 'r', key: byK, limit: (r) => r.L, window: '1m', cost: 4 }]);
      expect((await l.consume({ k: 'a', L: 10 })).allowed).toBe(true);
      const d = await l.consume({ k: 'b', L: 3 });
      expect(d.allowed).toBe(false);
      expect(d.rules[0]?.reason).toBe('cost_exceeds_limit');
    });

    it('a token bucket is capped at a lowered burst, and keeps its tokens when the limit rises', async () => {
      const l = limiter([{ name: 'r', key: byK, algorithm: 'token-bucket', window: '1s', limit: (r) => r.L, burst: (r) => r.B ?? r.L }]);
      // Full at burst 10: two taken, 8 left; at burst 3 only 3 remain, at the same instant.
      expect((await l.consume({ k: 'a', L: 10 })).rules[0]?.remaining).toBe(9);
      expect((await l.consume({ k: 'a', L: 10 })).rules[0]?.remaining).toBe(8);
      expect((await l.consume({ k: 'a', L: 10, B: 3 })).rules[0]?.remaining).toBe(2);
      expect(await until(l, { k: 'a', L: 10, B: 3 })).toBe(2);
      // Back to burst 10: nothing more at this instant (the bucket is empty).
      expect(await until(l, { k: 'a', L: 10 })).toBe(0);
    });

    for (const c of DYNAMIC) {
      it(`${c.label}: raising then lowering the limit never restores a budget`, async () => {
        const l = limiter([{ name: 'r', key: byK, limit: (r) => r.L, ...c.rule }]);
        const k = `down${serial++}`;
        const clock = ctx().clock;
        clock.advance(W - (clock.now() % W) + 100);
        const first = await until(l, { k, L: 4 });
        expect(first).toBe(4);
        await until(l, { k, L: 8 });
        expect(await until(l, { k, L: 4 }), 'back down at the same instant').toBe(0);
        expect(await until(l, { k, L: 1 }), 'further down').toBe(0);
      });

      it(`${c.label}: no sequence of limit changes admits more than the largest values in force allow`, async () => {
        const step = fc.record({
          dt: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 120 }), fc.integer({ min: 200, max: 1500 })),
          L: fc.constantFrom(...LIMITS),
          B: fc.constantFrom(...LIMITS),
          cost: fc.constantFrom(1, 1, 1, 2),
        });
        await fc.assert(
          fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps: Step[]) => {
            const l = limiter([{ name: 'r', key: byK, limit: (r) => r.L, cost: (r) => r.n ?? 1, ...c.rule }]);
            const k = `p${serial++}`;
            const clock = ctx().clock;
            const seen: Seen[] = [];
            for (const s of steps) {
              clock.advance(s.dt);
              const d: Decision = await l.consume({ k, L: s.L, B: s.B, n: s.cost });
              const r = d.rules[0];
              // The burst in force: the token bucket's function, else the limit (the default).
              const B = c.label.includes('burst per request') ? s.B : s.L;
              expect(r?.limit).toBe(s.L);
              seen.push({ t: clock.now(), L: s.L, B, cost: s.cost, allowed: d.allowed });
            }
            checkBound(c.label, seen);
          }),
          // Fewer runs where every decision is a round trip.
          { numRuns: ctx().store instanceof MemoryStore ? 60 : 12, seed: 16 + serial },
        );
      });
    }
  });

  describe('update', () => {
    it('replaces a limit in place: the next decision uses it and the state is kept', async () => {
      const l = limiter([{ name: 'r', key: byK, rate: '3/min', algorithm: 'fixed-window' }]);
      expect(await until(l, { k: 'a', L: 0 })).toBe(3);
      l.update('r', { limit: 5 });
      expect(l.rules[0]?.spec.limit).toBe(5);
      const d = await l.consume({ k: 'a', L: 0 });
      expect(d.rules[0]).toMatchObject({ limit: 5, remaining: 1, windowMs: 60_000 });
      l.update('r', { limit: 2 });
      expect(await until(l, { k: 'a', L: 0 })).toBe(0);
    });

    it('reaches tier rules and the stacks extend made, which share the rule', async () => {
      const l = limiter([{ name: 'base', key: byK, limit: 10, window: '1m', algorithm: 'fixed-window' }], {
        tiers: { pro: [{ name: 'pro', key: byK, limit: 1, window: '1m', algorithm: 'fixed-window' }] },
        tier: () => 'pro',
      });
      const route = l.extend([{ name: 'route', key: byK, limit: 10, window: '1m' }]);
      expect(await until(route, { k: 'a', L: 0 })).toBe(1);
      l.update('pro', { limit: 3 });
      expect(l.tiers?.pro?.[0]?.spec.limit).toBe(3);
      expect(await until(route, { k: 'a', L: 0 })).toBe(2);
      route.update('base', { limit: 4 });
      expect((await l.peek({ k: 'b', L: 0 })).rules[0]?.limit).toBe(4);
    });

    it('blockFor and cost change in place', async () => {
      const clock = ctx().clock;
      const l = limiter([{ name: 'r', key: byK, limit: 4, window: '1s', algorithm: 'fixed-window' }]);
      l.update('r', { cost: 2, blockFor: '1m' });
      expect((await l.consume({ k: 'a', L: 0 })).rules[0]?.remaining).toBe(2);
      await until(l, { k: 'a', L: 0 });
      clock.advance(5000);
      const d = await l.consume({ k: 'a', L: 0 });
      expect(d.allowed).toBe(false);
      expect(d.rules[0]?.reason).toBe('blocked');
    });

    it('is validated as at construction, all or nothing', async () => {
      const l = limiter([{ name: 'user', key: byK, limit: 4, window: '1s', algorithm: 'token-bucket' }]);
      expect(() => l.update('usr', { limit: 5 })).toThrow(
        expect.objectContaining({ code: 'TG_UNKNOWN_RULE', fix: expect.stringContaining("'user'") }),
      );
      expect(() => l.update('user', { limti: 5 } as never)).toThrow(
        expect.objectContaining({ code: 'TG_UNKNOWN_OPTION', fix: expect.stringContaining("'limit'") }),
      );
      expect(() => l.update('user', { window: '1m' } as never)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
      expect(() => l.update('user', { limit: 0 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_LIMIT' }));
      expect(() => l.update('user', { limit: 8, burst: -1 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_LIMIT' }));
      expect(() => l.update('user', { cost: 9 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_COST' }));
      expect(() => l.update('user', { blockFor: 'soon' as never })).toThrow(expect.objectContaining({ code: 'TG_INVALID_DURATION' }));
      expect(() => l.update('user', {})).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
      // Nothing of a refused update was applied.
      expect(l.rules[0]?.spec).toMatchObject({ limit: 4, burst: 4, blockForMs: 0 });
      expect((await l.consume({ k: 'a', L: 0 })).rules[0]?.limit).toBe(4);
    });

    it("a leaky bucket's limit changes only while its burst follows the limit", () => {
      const own = limiter([{ name: 'm', key: byK, algorithm: 'leaky-bucket', limit: 4, window: '1s', burst: 8 }]);
      expect(() => own.update('m', { limit: 8 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
      own.update('m', { burst: 2 });
      const follows = limiter([{ name: 'm', key: byK, algorithm: 'leaky-bucket', limit: 4, window: '1s' }]);
      follows.update('m', { limit: 8 });
      expect(follows.rules[0]?.spec).toMatchObject({ limit: 8, burst: 8 });
      expect(() => follows.update('m', { limit: 2, burst: 4 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    });
  });
}
