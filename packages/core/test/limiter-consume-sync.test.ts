import { createLimiter, ManualClock, MemoryStore, type Store, type StoreDecision } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

const rules = [
  { name: 'ip', limit: 3, window: '1m' as const, algorithm: 'fixed-window' as const, key: (r: { k: string }) => r.k },
  { name: 'all', limit: 5, window: '1m' as const, key: () => 'all' },
];

describe('limiter.consumeSync', () => {
  it('decides exactly as consume on a MemoryStore, consuming the same units', async () => {
    const clock = new ManualClock(0);
    const viaSync = createLimiter({ rules, store: new MemoryStore({ clock }), clock });
    const viaPromise = createLimiter({ rules, store: new MemoryStore({ clock }), clock });
    for (const k of ['a', 'a', 'b', 'a', 'a', 'c', 'b']) {
      const s = viaSync.consumeSync({ k });
      const p = await viaPromise.consume({ k });
      expect(s).toEqual(p);
    }
  });

  it('returns a decision that refund gives back', async () => {
    const clock = new ManualClock(0);
    const lim = createLimiter({ rules, store: new MemoryStore({ clock }), clock });
    const d = lim.consumeSync({ k: 'a' });
    expect(d?.rules.map((r) => r.remaining)).toEqual([2, 4]);
    await lim.refund({ k: 'a' }, d as NonNullable<typeof d>);
    expect(lim.consumeSync({ k: 'a' })?.rules.map((r) => r.remaining)).toEqual([2, 4]);
  });

  it('is undefined for a store that decides asynchronously, which is left untouched', () => {
    let calls = 0;
    const remote: Store = {
      consume: async (ops): Promise<StoreDecision> => {
        calls++;
        return {
          allowed: true,
          now: 0,
          outcomes: ops.map(() => ({ allowed: true, remaining: 1, resetMs: 0, retryAfterMs: 0, delayMs: 0, reason: undefined })),
        };
      },
      peek: () => Promise.reject(new Error('unused')),
      refund: async () => {},
      reset: async () => {},
      close: async () => {},
    };
    expect(createLimiter({ rules, store: remote }).consumeSync({ k: 'a' })).toBeUndefined();
    expect(calls).toBe(0);
  });

  it('throws what consume would reject with (a throwing key function, a closed store)', async () => {
    const lim = createLimiter({
      rules: [
        {
          name: 'u',
          rate: '1/s',
          key: () => {
            throw new Error('no session');
          },
        },
      ],
    });
    expect(() => lim.consumeSync({})).toThrow('no session');
    const store = new MemoryStore();
    await store.close();
    expect(() => createLimiter({ rules, store }).consumeSync({ k: 'a' })).toThrow(expect.objectContaining({ code: 'TG_STORE_CLOSED' }));
  });
});
