/**
 * The conformance suite of the operations by key (issue 16, item 4): `get`, `reset`,
 * `block`, `unblock`, `penalize` and `reward` on a limiter, through the public API, for one
 * store. Every algorithm; a block on a rule without `blockFor` refuses with reason
 * 'blocked'; penalize never beyond empty, reward never beyond a full budget; a key that
 * needs hashing reaches the state its requests use; every argument validated; and, for
 * every algorithm, random sequences of requests and operations give the same answers as a
 * MemoryStore (the reference: for the Redis store, the Lua mirror agrees with the core).
 */

import diagnosticsChannel from 'node:diagnostics_channel';
import {
  createLimiter,
  type KeyOpMessage,
  type KeyState,
  type Limiter,
  ManualClock,
  MemoryStore,
  OPERATION_ID_TTL_MS,
  type Rule,
  type Store,
} from '@tollgate/core';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ALGORITHM_CASES, type ContractReq, type StoreContractOptions } from './store-contract.js';

const START = Date.UTC(2026, 0, 1);
const byKey = (req: ContractReq): string => req.k ?? 'a';

/** The figures of a state that two stores must agree on (not the time or the key text). */
function figures(s: KeyState) {
  return {
    remaining: s.remaining,
    resetMs: s.resetMs,
    retryAfterMs: s.retryAfterMs,
    blocked: s.blocked,
    blockedUntil: s.blockedUntil,
    exists: s.exists,
  };
}

export function keyOpsContract(
  name: string,
  factory: (clock: ManualClock) => Store | Promise<Store>,
  options: StoreContractOptions = {},
): void {
  describe(`operations by key: ${name}`, () => {
    let clock: ManualClock;
    let store: Store;
    let prefix: string;
    let serial = 0;

    beforeEach(async () => {
      clock = new ManualClock(START);
      store = await factory(clock);
      serial++;
      prefix = `${options.prefix ?? 'ko'}${serial}x${Math.floor(Math.random() * 2 ** 40).toString(36)}`;
    });

    afterEach(async () => {
      await options.afterEach?.(store);
      await store.close();
    });

    function one(rule: Omit<Rule<ContractReq>, 'name'>, s: Store = store, clk = clock): Limiter<ContractReq> {
      return createLimiter<ContractReq>({ rules: [{ name: 'r', key: byKey, ...rule }], store: s, clock: clk, prefix });
    }

    describe.each(ALGORITHM_CASES)('$label', ({ rule }) => {
      it('get of a fresh key: a full budget, nothing stored, not blocked', async () => {
        const l = one(rule);
        const s = await l.get('r', 'a');
        expect(s).toMatchObject({ rule: 'r', key: 'a', storeKey: 'a', limit: 5, windowMs: 1000, capacity: 5 });
        expect(figures(s)).toEqual({ remaining: 5, resetMs: 0, retryAfterMs: 0, blocked: false, blockedUntil: undefined, exists: false });
        expect(s.at).toBe(START);
      });

      it('get reads what requests used, without consuming', async () => {
        const l = one(rule);
        await l.consume({});
        await l.consume({});
        const s = await l.get('r', 'a');
        expect(s.exists).toBe(true);
        expect(s.remaining).toBe(3);
        expect(s.resetMs).toBeGreaterThan(0);
        expect((await l.get('r', 'a')).remaining).toBe(3);
        expect((await l.peek({})).rules[0]?.remaining).toBe(2);
      });

      it('penalize consumes units as admitted requests would, never beyond empty', async () => {
        const l = one(rule);
        expect((await l.penalize('r', 'a', 3)).remaining).toBe(2);
        expect((await l.consume({})).rules[0]?.remaining).toBe(1);
        const empty = await l.penalize('r', 'a', 100);
        expect(empty.remaining).toBe(0);
        expect(empty.retryAfterMs).toBeGreaterThan(0);
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.rules[0]?.reason).toBe('limit');
        // Never beyond empty: the key recovers as the rule recovers from a full use, not later.
        expect(d.retryAfterMs).toBe(empty.retryAfterMs);
      });

      it('reward gives back units, never beyond a full budget', async () => {
        const l = one(rule);
        for (let i = 0; i < 4; i++) await l.consume({});
        expect((await l.reward('r', 'a', 2)).remaining).toBe(3);
        const full = await l.reward('r', 'a', 1000);
        expect(full.remaining).toBe(5);
        // No credit: exactly the budget is admitted now, then a refusal.
        const ds = [];
        for (let i = 0; i < 6; i++) ds.push((await l.consume({})).allowed);
        expect(ds).toEqual([true, true, true, true, true, false]);
      });

      it('block refuses with reason "blocked" and Retry-After on a rule without blockFor; unblock lifts it', async () => {
        const l = one(rule);
        await l.consume({});
        const b = await l.block('r', 'a', '1m');
        expect(b).toMatchObject({ blocked: true, blockedUntil: START + 60_000, remaining: 0, retryAfterMs: 60_000, exists: true });
        const d = await l.consume({});
        expect(d.allowed).toBe(false);
        expect(d.rules[0]?.reason).toBe('blocked');
        expect(d.retryAfterMs).toBe(60_000);
        clock.advance(10_000);
        expect((await l.get('r', 'a')).retryAfterMs).toBe(50_000);
        const u = await l.unblock('r', 'a');
        expect(u.blocked).toBe(false);
        expect(u.blockedUntil).toBeUndefined();
        expect((await l.consume({})).allowed).toBe(true);
      });

      it('reset(rule, key) forgets the counter and the block', async () => {
        const l = one(rule);
        for (let i = 0; i < 5; i++) await l.consume({});
        await l.block('r', 'a', '1h');
        await l.reset('r', 'a');
        const s = await l.get('r', 'a');
        expect(figures(s)).toEqual({ remaining: 5, resetMs: 0, retryAfterMs: 0, blocked: false, blockedUntil: undefined, exists: false });
        expect((await l.consume({})).allowed).toBe(true);
      });
    });

    it('sliding-window reward: the current count first, then the fewest units of the previous window that lower the estimate', async () => {
      const l = one({ algorithm: 'sliding-window', limit: 10, window: '1s' });
      await l.consume({}, { cost: 10 });
      clock.set(START + 1500);
      // prev 10 at half weight: an estimate of 5.
      expect((await l.get('r', 'a')).remaining).toBe(5);
      const s = await l.reward('r', 'a', 2);
      // prev 7 (not 6): 7 · 0.5 = 3.5, floored 3, so 7 left; full once 7 · (1 - e/W) < 1, at e = 858.
      expect(s.remaining).toBe(7);
      expect(s.resetMs).toBe(358);
      await l.consume({});
      expect((await l.reward('r', 'a', 1)).remaining).toBe(7);
    });

    it('sliding-log reward removes the newest entries first', async () => {
      const l = one({ algorithm: 'sliding-log', limit: 5, window: '1s' });
      await l.consume({}, { cost: 2 });
      clock.advance(300);
      await l.consume({}, { cost: 2 });
      const s = await l.reward('r', 'a', 3);
      expect(s.remaining).toBe(4);
      // What is left is one unit of the older entry: full again when it expires.
      expect(s.resetMs).toBe(700);
    });

    it('leaky queue penalize takes places (later requests wait longer); reward gives them back, never before now', async () => {
      const l = one({ algorithm: 'leaky-bucket', mode: 'queue', limit: 5, window: '1s' });
      await l.penalize('r', 'a', 2);
      expect((await l.consume({})).delayMs).toBe(600);
      await l.reward('r', 'a', 100);
      expect((await l.consume({})).delayMs).toBe(200);
    });

    it('token bucket reward is capped at the burst', async () => {
      const l = one({ algorithm: 'token-bucket', limit: 5, window: '1s', burst: 8 });
      await l.consume({}, { cost: 8 });
      expect((await l.reward('r', 'a', 3)).remaining).toBe(3);
      const s = await l.reward('r', 'a', 50);
      expect(s).toMatchObject({ remaining: 8, capacity: 8, resetMs: 0 });
    });

    it.each(['day', 'month'] as const)('a calendar quota per %s: get, penalize and reward on its UTC period', async (per) => {
      clock.set(Date.UTC(2026, 1, 10, 12));
      const l = one({ quota: 100, per });
      await l.consume({}, { cost: 30 });
      const end = per === 'day' ? Date.UTC(2026, 1, 11) : Date.UTC(2026, 2, 1);
      expect(await l.get('r', 'a')).toMatchObject({ remaining: 70, resetMs: end - clock.now(), capacity: 100 });
      expect((await l.penalize('r', 'a', 500)).remaining).toBe(0);
      expect((await l.get('r', 'a')).retryAfterMs).toBe(end - clock.now());
      expect((await l.reward('r', 'a', 40)).remaining).toBe(40);
      clock.set(end);
      expect((await l.get('r', 'a')).remaining).toBe(100);
    });

    it('a block ends at its deadline, and a later block is never shortened by a shorter one', async () => {
      const l = one({ limit: 5, window: '1s' });
      await l.block('r', 'a', '1h');
      expect((await l.block('r', 'a', '1m')).blockedUntil).toBe(START + 3_600_000);
      expect((await l.block('r', 'a', '2h')).blockedUntil).toBe(START + 7_200_000);
      clock.set(START + 7_200_000 - 1);
      expect((await l.consume({})).rules[0]?.reason).toBe('blocked');
      clock.set(START + 7_200_000);
      expect((await l.consume({})).allowed).toBe(true);
    });

    it('unblock lifts a blockFor block and leaves the counter; the key is refused by the counter alone', async () => {
      const l = one({ algorithm: 'fixed-window', limit: 2, window: '1m', blockFor: '1h' });
      await l.consume({});
      await l.consume({});
      const refused = await l.consume({});
      expect(refused.rules[0]?.reason).toBe('limit');
      expect((await l.consume({})).rules[0]?.reason).toBe('blocked');
      const u = await l.unblock('r', 'a');
      expect(u).toMatchObject({ blocked: false, remaining: 0, retryAfterMs: 60_000 });
      clock.advance(60_000);
      expect((await l.consume({})).allowed).toBe(true);
    });

    it('a key that needs hashing (spaces, non-ASCII, long) reaches the state its requests use', async () => {
      const l = one({ limit: 5, window: '1m' });
      for (const k of ['GET /users list', 'ünïcödé', 'x'.repeat(300)]) {
        await l.consume({ k });
        await l.consume({ k });
        const s = await l.get('r', k);
        expect(s.remaining).toBe(3);
        expect(s.storeKey).toMatch(/^#/);
        await l.block('r', k, '1m');
        expect((await l.consume({ k })).rules[0]?.reason).toBe('blocked');
        expect((await l.consume({ k: `${k}!` })).allowed).toBe(true);
      }
    });

    it('a numeric key is its text, as the engine keys numbers', async () => {
      const l = createLimiter<{ id: number }>({
        rules: [{ name: 'user', key: (r) => r.id, limit: 3, window: '1m' }],
        store,
        clock,
        prefix,
      });
      await l.consume({ id: 42 });
      expect((await l.get('user', 42)).remaining).toBe(2);
      expect((await l.get('user', '42')).remaining).toBe(2);
    });

    it('rules sharing a group share the state an operation changes', async () => {
      const l = createLimiter<ContractReq>({
        rules: [
          { name: 'csv', group: 'export', key: byKey, limit: 4, window: '1m' },
          { name: 'pdf', group: 'export', key: byKey, limit: 4, window: '1m' },
        ],
        store,
        clock,
        prefix,
      });
      await l.penalize('csv', 'a', 3);
      expect((await l.get('pdf', 'a')).remaining).toBe(1);
    });

    it('every argument is validated: coded errors, and nothing reaches the store', async () => {
      const l = one({ limit: 5, window: '1m' });
      await expect(l.get('nope', 'a')).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE' });
      await expect(l.get('R', 'a')).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE', fix: expect.stringContaining("'r'") });
      await expect(l.reset('nope', 'a')).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE' });
      await expect(l.get(42 as unknown as string, 'a')).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE' });
      for (const key of [undefined, null, {}, Number.NaN, ['a']]) {
        await expect(l.get('r', key as unknown as string)).rejects.toMatchObject({ code: 'TG_INVALID_KEY' });
      }
      for (const d of ['forever', 0, -5, '', '400d', Number.NaN]) {
        await expect(l.block('r', 'a', d as never)).rejects.toMatchObject({ code: 'TG_INVALID_DURATION' });
      }
      for (const units of [0, -1, 1.5, '3', Number.POSITIVE_INFINITY, 2 ** 60, undefined]) {
        await expect(l.penalize('r', 'a', units as number)).rejects.toMatchObject({ code: 'TG_INVALID_UNITS' });
        await expect(l.reward('r', 'a', units as number)).rejects.toMatchObject({ code: 'TG_INVALID_UNITS' });
      }
      expect((await l.get('r', 'a')).exists).toBe(false);
    });

    it('an operation id: a change repeated with the same id is applied once (a retry), per rule and key; a new id is a new change', async () => {
      const l = one({ limit: 100, window: '1m' });
      const charge = { id: 'charge 1 ü' };
      expect((await l.penalize('r', 'a', 40, charge)).remaining).toBe(60);
      expect((await l.penalize('r', 'a', 40, charge)).remaining).toBe(60);
      // The same id on another key (or rule) is that key's own change.
      expect((await l.penalize('r', 'b', 40, charge)).remaining).toBe(60);
      expect((await l.penalize('r', 'a', 40, { id: 'charge 2' })).remaining).toBe(20);
      expect((await l.reward('r', 'a', 30, { id: 'refund 1' })).remaining).toBe(50);
      expect((await l.reward('r', 'a', 30, { id: 'refund 1' })).remaining).toBe(50);
      expect((await l.block('r', 'a', '10s', { id: 'block 1' })).blockedUntil).toBe(START + 10_000);
      clock.advance(5_000);
      // Repeated later with its id: the block is not moved.
      expect((await l.block('r', 'a', '10s', { id: 'block 1' })).blockedUntil).toBe(START + 10_000);
      expect((await l.unblock('r', 'a', { id: 'unblock 1' })).blocked).toBe(false);
      await l.block('r', 'a', '10s');
      expect((await l.unblock('r', 'a', { id: 'unblock 1' })).blocked).toBe(true);
      // Without an id every call is a change.
      expect((await l.penalize('r', 'b', 10)).remaining).toBe(50);
      expect((await l.penalize('r', 'b', 10)).remaining).toBe(40);
      for (const id of ['', 'x'.repeat(129), 42, null]) {
        await expect(l.penalize('r', 'a', 1, { id } as never)).rejects.toMatchObject({
          code: 'TG_INVALID_OPTION',
          path: 'penalize.values.id',
        });
      }
      await expect(l.get('r', 'a', { id: 'x' } as never)).rejects.toMatchObject({ code: 'TG_INVALID_OPTION' });
    });

    it("an operation id is remembered for a day of the store's time (the limiter's clock): a repeat a day later is a new change", async () => {
      const l = one({ limit: 100, window: '1m' });
      const charge = { id: 'charge 1' };
      expect((await l.penalize('r', 'a', 40, charge)).remaining).toBe(60);
      clock.advance(OPERATION_ID_TTL_MS - 1);
      expect((await l.penalize('r', 'a', 40, charge)).remaining).toBe(100);
      clock.advance(1);
      expect((await l.penalize('r', 'a', 40, charge)).remaining).toBe(60);
      expect((await l.penalize('r', 'a', 40, charge)).remaining).toBe(60);
    });

    it('each operation is published on tollgate:key-op with the state after it', async () => {
      const l = one({ limit: 5, window: '1m' });
      const seen: KeyOpMessage[] = [];
      const listener = (m: unknown) => seen.push(m as KeyOpMessage);
      diagnosticsChannel.subscribe('tollgate:key-op', listener);
      try {
        await l.penalize('r', 'a', 2);
        await l.block('r', 'a', '30s');
        await l.unblock('r', 'a');
        await l.reward('r', 'a', 1);
        await l.get('r', 'a');
        await l.reset('r', 'a');
        await expect(l.get('nope', 'a')).rejects.toThrow();
      } finally {
        diagnosticsChannel.unsubscribe('tollgate:key-op', listener);
      }
      expect(seen.map((m) => [m.operation, m.rule, m.key, m.units ?? m.blockMs, m.state?.remaining])).toEqual([
        ['penalize', 'r', 'a', 2, 3],
        ['block', 'r', 'a', 30_000, 0],
        ['unblock', 'r', 'a', undefined, 3],
        ['reward', 'r', 'a', 1, 4],
        ['get', 'r', 'a', undefined, 4],
        ['reset', 'r', 'a', undefined, undefined],
      ]);
    });

    describe.each(ALGORITHM_CASES)('$label: the same answers as MemoryStore', ({ rule }) => {
      it('random requests, operations and clock moves', async () => {
        type Step =
          | { t: 'consume'; cost: number }
          | { t: 'get' }
          | { t: 'penalize' | 'reward'; units: number }
          | { t: 'block'; ms: number }
          | { t: 'unblock' }
          | { t: 'reset' }
          | { t: 'wait'; ms: number };
        const step = fc.oneof(
          fc.record({ t: fc.constant('consume' as const), cost: fc.integer({ min: 1, max: 3 }) }),
          fc.record({ t: fc.constant('get' as const) }),
          fc.record({ t: fc.constantFrom('penalize' as const, 'reward' as const), units: fc.integer({ min: 1, max: 7 }) }),
          fc.record({ t: fc.constant('block' as const), ms: fc.integer({ min: 1, max: 1500 }) }),
          fc.record({ t: fc.constant('unblock' as const) }),
          fc.record({ t: fc.constant('reset' as const) }),
          fc.record({ t: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 700 }) }),
        );
        let run = 0;
        await fc.assert(
          fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps: Step[]) => {
            run++;
            const refClock = new ManualClock(START);
            const ref = new MemoryStore({ clock: refClock });
            const k = `p${run}`;
            const a = one(rule, ref, refClock);
            const b = one(rule);
            clock.set(START);
            try {
              for (const s of steps) {
                if (s.t === 'wait') {
                  refClock.advance(s.ms);
                  clock.advance(s.ms);
                  continue;
                }
                const both = async <T>(f: (l: Limiter<ContractReq>) => Promise<T>): Promise<[T, T]> => [await f(a), await f(b)];
                if (s.t === 'consume') {
                  // (A deny cache may answer a refusal again with its remaining as of the first.)
                  const [x, y] = await both((l) => l.consume({ k }, { cost: s.cost }));
                  const verdict = (d: typeof x) => d.rules.map((r) => [r.allowed, r.reason, r.retryAfterMs, r.allowed ? r.remaining : 0]);
                  expect(verdict(y), JSON.stringify(steps)).toEqual(verdict(x));
                } else if (s.t === 'reset') await both((l) => l.reset('r', k));
                else {
                  const [x, y] = await both((l) =>
                    s.t === 'get'
                      ? l.get('r', k)
                      : s.t === 'block'
                        ? l.block('r', k, s.ms)
                        : s.t === 'unblock'
                          ? l.unblock('r', k)
                          : l[s.t]('r', k, s.units),
                  );
                  expect(figures(y), JSON.stringify(steps)).toEqual(figures(x));
                }
              }
            } finally {
              await ref.close();
            }
          }),
          { numRuns: 40 },
        );
      });
    });
  });
}
