/**
 * MemoryStore at `maxKeys` (SPEC 6.2): expired states go first, then states that are
 * neither refusing nor blocked; a refused or blocked key is evicted only when nothing else
 * is left, and then it is counted (`heldEvictions`, `tollgate:memory-store:evicted`). So a
 * flood of junk keys never hands a refused client a fresh budget.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { type AlgorithmName, createLimiter, type HeldEvictionMessage, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';

type Req = { user: string };
const START = Date.UTC(2026, 0, 1, 12);

const seen: HeldEvictionMessage[] = [];
const onEvicted = (m: unknown) => seen.push(m as HeldEvictionMessage);
diagnosticsChannel.subscribe('tollgate:memory-store:evicted', onEvicted);
afterEach(() => {
  seen.length = 0;
});

function login(store: MemoryStore, clock: ManualClock, extra: Partial<Rule<Req>> = {}) {
  return createLimiter<Req>({
    rules: [{ name: 'login', key: (r) => r.user, algorithm: 'sliding-window', limit: 5, window: '15m', ...extra }],
    store,
    clock,
  });
}

describe('MemoryStore eviction at maxKeys', () => {
  for (const [what, extra] of [
    ['refused', {}],
    ['blocked', { blockFor: '1h' }],
  ] as const) {
    it(`10 000 junk usernames do not give a ${what} per-username login attacker a fresh budget (bug: eviction was oldest-first)`, async () => {
      const clock = new ManualClock(START);
      const store = new MemoryStore({ maxKeys: 1000, sweepIntervalMs: 0 });
      const l = login(store, clock, extra);
      let admitted = 0;
      for (let i = 0; i < 6; i++) if ((await l.consume({ user: 'admin' })).allowed) admitted++;
      expect(admitted).toBe(5);
      for (let i = 0; i < 10_000; i++) {
        clock.advance(1);
        expect((await l.consume({ user: `junk${i}` })).allowed).toBe(true);
      }
      expect(store.size).toBe(1000);
      const d = await l.consume({ user: 'admin' });
      expect(d.allowed).toBe(false);
      expect(d.rules[0]?.remaining).toBe(0);
      expect(store.heldEvictions).toBe(0);
      expect(seen).toEqual([]);
      await store.close();
    });
  }

  it('expired states go before live ones: a store of expired states keeps every live one', async () => {
    const clock = new ManualClock(START);
    const store = new MemoryStore({ maxKeys: 100, sweepIntervalMs: 0 });
    const short = createLimiter<Req>({
      rules: [{ name: 's', key: (r) => r.user, algorithm: 'fixed-window', limit: 5, window: '1s' }],
      store,
      clock,
    });
    const long = createLimiter<Req>({
      rules: [{ name: 'l', key: (r) => r.user, algorithm: 'fixed-window', limit: 5, window: '1h' }],
      store,
      clock,
    });
    for (let i = 0; i < 50; i++) await short.consume({ user: `s${i}` });
    for (let i = 0; i < 50; i++) await long.consume({ user: `l${i}` });
    clock.advance(2000);
    // 50 new keys: every one takes the place of an expired short-window state.
    for (let i = 0; i < 50; i++) await long.consume({ user: `n${i}` });
    for (let i = 0; i < 50; i++) expect((await long.peek({ user: `l${i}` })).rules[0]?.remaining).toBe(3);
    await store.close();
  });

  it('a refused key is evicted only when nothing else is left, and that is counted on tollgate:memory-store:evicted', async () => {
    const clock = new ManualClock(START);
    const store = new MemoryStore({ maxKeys: 10, sweepIntervalMs: 0 });
    const l = createLimiter<Req>({
      rules: [{ name: 'r', key: (r) => r.user, algorithm: 'fixed-window', limit: 1, window: '1h' }],
      store,
      clock,
      prefix: 'ev',
    });
    for (let i = 0; i < 10; i++) {
      await l.consume({ user: `u${i}` });
      expect((await l.consume({ user: `u${i}` })).allowed).toBe(false);
    }
    expect(store.heldEvictions).toBe(0);
    await l.consume({ user: 'new' });
    expect(store.size).toBe(10);
    expect(store.heldEvictions).toBe(1);
    expect(seen).toEqual([{ store, ruleId: 'ev:r:f3600000', key: 'u0', evictions: 1 }]);
    // The oldest refused key went; the others are still refused.
    expect((await l.peek({ user: 'u0' })).allowed).toBe(true);
    for (let i = 1; i < 10; i++) expect((await l.peek({ user: `u${i}` })).allowed).toBe(false);
    await store.close();
  });

  it('a refused key that is admitted again becomes evictable like any other', async () => {
    const clock = new ManualClock(START);
    const store = new MemoryStore({ maxKeys: 3, sweepIntervalMs: 0 });
    const l = createLimiter<Req>({
      rules: [{ name: 'r', key: (r) => r.user, algorithm: 'token-bucket', limit: 2, window: '1s' }],
      store,
      clock,
    });
    await l.consume({ user: 'a' });
    await l.consume({ user: 'a' });
    expect((await l.consume({ user: 'a' })).allowed).toBe(false);
    clock.advance(1000);
    // Admitted with a unit to spare (a key its admission empties stays held).
    expect((await l.consume({ user: 'a' })).rules[0]?.remaining).toBe(1);
    await l.consume({ user: 'b' });
    await l.consume({ user: 'c' });
    await l.consume({ user: 'd' });
    expect(store.size).toBe(3);
    // 'a' (oldest, live again) went: its bucket is full again.
    expect((await l.peek({ user: 'a' })).rules[0]?.remaining).toBe(1);
    expect(store.heldEvictions).toBe(0);
    await store.close();
  });

  it('bug: a key emptied by its last admission (remaining 0, not yet refused) got a fresh budget from a flood of new keys', async () => {
    for (const algorithm of ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket', 'sliding-buckets'] as const) {
      const clock = new ManualClock(START);
      const store = new MemoryStore({ maxKeys: 100, sweepIntervalMs: 0 });
      const l = login(store, clock, { algorithm });
      const used = [];
      for (let i = 0; i < 5; i++) used.push((await l.consume({ user: 'admin' })).allowed);
      expect(used, algorithm).toEqual([true, true, true, true, true]);
      for (let i = 0; i < 1000; i++) {
        clock.advance(1);
        await l.consume({ user: `junk${i}` });
      }
      expect(store.size).toBe(100);
      expect((await l.consume({ user: 'admin' })).allowed, `${algorithm}: the emptied key kept its state`).toBe(false);
      expect(store.heldEvictions).toBe(0);
      await store.close();
    }
  });

  it('property: a refused, blocked or emptied key survives any flood of new keys while other states exist', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 40 }),
        fc.integer({ min: 2, max: 3 }),
        fc.boolean(),
        fc.array(fc.record({ limiter: fc.nat(1), refused: fc.boolean(), emptied: fc.boolean(), repeat: fc.nat(3) }), {
          minLength: 1,
          maxLength: 300,
        }),
        async (maxKeys, limit, block, traffic) => {
          const clock = new ManualClock(START);
          const store = new MemoryStore({ maxKeys, sweepIntervalMs: 0 });
          const rule = (name: string, algorithm: AlgorithmName): Rule<Req> => ({
            name,
            key: (r) => r.user,
            algorithm,
            limit,
            window: '1h',
            ...(block ? { blockFor: '2h' } : {}),
          });
          const limiters = [
            createLimiter<Req>({ rules: [rule('a', 'fixed-window')], store, clock }),
            createLimiter<Req>({ rules: [rule('b', 'sliding-log')], store, clock }),
          ];
          const refused: [number, string][] = [];
          let i = 0;
          for (const t of traffic) {
            clock.advance(1);
            const l = limiters[t.limiter] as (typeof limiters)[number];
            const user = `u${i++}`;
            // At most maxKeys - 1 refused (or emptied: its next request refused) keys: one
            // state besides them is always left, with budget to spare.
            if (t.refused && refused.length < maxKeys - 1) {
              for (let k = 0; k < (t.emptied ? limit : limit + 1); k++) await l.consume({ user });
              refused.push([t.limiter, user]);
            } else for (let k = 0; k < Math.min(t.repeat + 1, limit - 1); k++) await l.consume({ user });
          }
          for (const [which, user] of refused) {
            const d = await (limiters[which] as (typeof limiters)[number]).peek({ user });
            expect(d.allowed, `${user} got a fresh budget`).toBe(false);
          }
          expect(store.size).toBeLessThanOrEqual(maxKeys);
          expect(store.heldEvictions).toBe(0);
          await store.close();
        },
      ),
      { numRuns: 150 },
    );
  });
});
