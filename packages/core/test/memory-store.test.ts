/**
 * MemoryStore specifics (SPEC 6.2): bounded by maxKeys under a key flood, lazy expiry and
 * the sweep, an unref'd sweep timer that close() clears, and no use after close. The
 * behaviour every store shares is in test/conformance.
 */
import { constant, createLimiter, ManualClock, MemoryStore, TollgateError } from '@tollgate/core';
import { afterEach, describe, expect, it, vi } from 'vitest';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('MemoryStore', () => {
  it('stays within maxKeys under a key flood (one key per request) and keeps deciding', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, maxKeys: 10_000, sweepIntervalMs: 0 });
    const l = createLimiter<{ k: string }>({
      rules: [{ name: 'r', key: (req) => req.k, algorithm: 'fixed-window', limit: 1, window: '1h' }],
      store,
      clock,
    });
    let max = 0;
    let admitted = 0;
    for (let i = 0; i < 200_000; i++) {
      if ((await l.consume({ k: `flood-${i}` })).allowed) admitted++;
      if (store.size > max) max = store.size;
    }
    expect(admitted).toBe(200_000);
    expect(max).toBe(10_000);
    expect(store.size).toBe(10_000);
    // The limits still hold for keys that are present: the newest 1000 are all at their limit.
    for (let i = 199_000; i < 200_000; i++) {
      const d = await l.consume({ k: `flood-${i}` });
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBeGreaterThan(0);
    }
    expect(store.size).toBe(10_000);
    await store.close();
  }, 60_000);

  it('evicts expired states before live ones when full, even when the live one is the oldest', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, maxKeys: 4, sweepIntervalMs: 0 });
    const l = createLimiter<{ k: string }>({
      rules: [{ name: 'r', key: (req) => req.k, algorithm: 'fixed-window', align: 'first-request', limit: 1, window: '1s' }],
      store,
      clock,
    });
    for (const k of ['keep', 'a', 'b', 'c']) await l.consume({ k });
    clock.set(1500);
    await l.consume({ k: 'keep' }); // a new window for the oldest key: live until 2500
    clock.set(1600); // a, b and c have expired, nothing swept them
    expect(store.size).toBe(4);
    await l.consume({ k: 'd' });
    expect(store.size).toBe(2);
    // The oldest but live state survived the eviction.
    expect((await l.consume({ k: 'keep' })).allowed).toBe(false);
    await store.close();
  });

  it('drops expired states lazily on read, and all at once with sweep()', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter<{ k: string }>({
      rules: [{ name: 'r', key: (req) => req.k, algorithm: 'sliding-window', limit: 5, window: '1s' }],
      store,
      clock,
    });
    for (let i = 0; i < 100; i++) await l.consume({ k: `k${i}` });
    expect(store.size).toBe(100);
    clock.set(1999); // cur was counted in [0, 1000): it matters until 2000
    expect(store.sweep(clock.now())).toBe(0);
    clock.set(2000);
    expect(store.size).toBe(100); // nothing runs by itself on a ManualClock
    await l.peek({ k: 'k0' });
    expect(store.size).toBe(99); // read → found expired → dropped
    expect(store.sweep(clock.now())).toBe(99);
    expect(store.size).toBe(0);
    await store.close();
  });

  it('sweeps on an unref’d interval, which close() clears', async () => {
    const setSpy = vi.spyOn(globalThis, 'setInterval');
    const clearSpy = vi.spyOn(globalThis, 'clearInterval');
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, sweepIntervalMs: 10 });
    const timer = setSpy.mock.results.at(-1)?.value as NodeJS.Timeout;
    expect(timer).toBeDefined();
    expect(timer.hasRef()).toBe(false);
    const short = createLimiter({ rules: [{ name: 's', key: constant('x'), limit: 1, window: '1s' }], store, clock });
    const long = createLimiter({ rules: [{ name: 'l', key: constant('x'), limit: 1, window: '1h' }], store, clock });
    await short.consume({});
    clock.set(10_000);
    // Tells the store the time without reading the expired state.
    await long.consume({});
    expect(store.size).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(store.size).toBe(1);
    await store.close();
    expect(clearSpy).toHaveBeenCalledWith(timer);
  });

  it('sweepIntervalMs: 0 starts no timer at all', async () => {
    const setSpy = vi.spyOn(globalThis, 'setInterval');
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    expect(setSpy).not.toHaveBeenCalled();
    await store.close();
  });

  it('throws TG_STORE_CLOSED on any use after close()', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock });
    const l = createLimiter({ rules: [{ name: 'r', key: constant('x'), limit: 1, window: '1s' }], store, clock });
    const d = await l.consume({});
    await store.close();
    await store.close(); // idempotent
    const closed = (p: Promise<unknown>) =>
      p.then(
        () => expect.unreachable('should have rejected'),
        (err: unknown) => {
          expect(err).toBeInstanceOf(TollgateError);
          expect((err as TollgateError).code).toBe('TG_STORE_CLOSED');
        },
      );
    await closed(l.consume({}));
    await closed(l.peek({}));
    await closed(l.refund({}, d));
    await closed(l.reset({}));
    expect(() => store.consumeSync(l.resolve({}), 0)).toThrow(TollgateError);
  });

  it('rejects bad options at construction', () => {
    for (const maxKeys of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '10' as unknown as number]) {
      expect(() => new MemoryStore({ maxKeys })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    }
    expect(() => new MemoryStore({ sweepIntervalMs: -1 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => new MemoryStore({ clock: {} as never })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => new MemoryStore({ maxkeys: 5 } as never)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
  });
});
