/**
 * Reserve and settle on MemoryStore (the shared cases in reserve-contract.ts), and what is
 * the memory store's own: a key in debt is held against a flood of new keys, and a store
 * without `settle` cannot reserve.
 */
import { createLimiter, ManualClock, MemoryStore, type Store, TollgateError } from '@tollgate/core';
import { describe, expect, it } from 'vitest';
import { reserveContract, START } from './reserve-contract.js';

reserveContract('MemoryStore', (clock) => new MemoryStore({ clock, sweepIntervalMs: 0 }));

describe('MemoryStore: reservations', () => {
  it('a key in debt is held: a flood of new keys does not evict it into a fresh budget', async () => {
    const clock = new ManualClock(START);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0, maxKeys: 50 });
    const l = createLimiter({
      rules: [{ name: 'r', key: (q: { k: string }) => q.k, algorithm: 'token-bucket', limit: 10, window: '1m' }],
      store,
      clock,
    });
    await (await l.reserve({ k: 'owing' }, { cost: 1 })).settle(30);
    for (let i = 0; i < 500; i++) await l.consume({ k: `junk${i}` });
    expect(store.size).toBeLessThanOrEqual(50);
    expect((await l.consume({ k: 'owing' })).allowed).toBe(false);
    await store.close();
  });

  it('a store without settle: reserve rejects with TG_STORE_UNSUPPORTED and consumes nothing', async () => {
    const inner = new MemoryStore({ sweepIntervalMs: 0 });
    const store: Store = {
      consume: (ops, now) => inner.consume(ops, now),
      peek: (ops, now) => inner.peek(ops, now),
      refund: (ops, at, now) => inner.refund(ops, at, now),
      reset: (rule, key) => inner.reset(rule, key),
      close: () => inner.close(),
    };
    const l = createLimiter({ rules: [{ name: 'r', key: () => 'a', limit: 2, window: '1m' }], store });
    const err = await l.reserve({}, { cost: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TollgateError);
    expect((err as TollgateError).code).toBe('TG_STORE_UNSUPPORTED');
    // A peek of cost 1 on an untouched key of limit 2 leaves 1.
    expect((await l.peek({})).rules[0]?.remaining).toBe(1);
    await store.close();
  });
});
