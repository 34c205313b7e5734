/**
 * Regression tests, each named after the bug it pins (found by the store conformance
 * suite, test/conformance). SPEC 1: retryAfterMs is exact; SPEC 3: time that goes
 * backwards is treated as no time passing.
 */
import { constant, createLimiter, ManualClock, MemoryStore, type Rate, type Rule, sanitizeKey } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

async function exactAfterBackwards(rule: Omit<Rule, 'name' | 'key'>) {
  const clock = new ManualClock(10_000);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  const l = createLimiter({ rules: [{ name: 'r', key: constant('k'), ...rule }], store, clock });
  await l.consume({});
  await l.consume({});
  clock.set(7_500); // the clock steps back 2.5 s
  const d = await l.consume({});
  expect(d.allowed).toBe(false);
  // The entries at 10 000 expire at 11 000: 3 500 ms after the clock's reading (the bug said 1 000).
  expect(d.retryAfterMs).toBe(3500);
  clock.set(7_500 + d.retryAfterMs - 1);
  expect((await l.peek({})).allowed).toBe(false);
  clock.set(7_500 + d.retryAfterMs);
  expect((await l.peek({})).allowed).toBe(true);
  await store.close();
}

describe('regressions', () => {
  it('sliding-log: retryAfterMs after the clock stepped back was measured from the newest entry, not from now', async () => {
    await exactAfterBackwards({ algorithm: 'sliding-log', limit: 2, window: '1s' });
  });

  it('sliding-window: retryAfterMs after the clock stepped back was measured from the stored window, not from now', async () => {
    // Two in window [10 000, 11 000). From 11 000 they are prev = 2, which has decayed to
    // 1.998 at 11 001: floor 1 + 1 <= 2. The bug reported 1 001 ms from the clock's reading.
    const clock = new ManualClock(10_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter({
      rules: [{ name: 'r', key: constant('k'), algorithm: 'sliding-window', limit: 2, window: '1s' }],
      store,
      clock,
    });
    await l.consume({});
    await l.consume({});
    clock.set(7_500);
    const d = await l.consume({});
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBe(11_001 - 7_500);
    clock.set(11_000);
    expect((await l.peek({})).allowed).toBe(false);
    clock.set(11_001);
    expect((await l.peek({})).allowed).toBe(true);
    await store.close();
  });

  for (const algorithm of ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket'] as const) {
    it(`countRejected (${algorithm}): retryAfterMs ignored the penalty the refusal itself writes`, async () => {
      const clock = new ManualClock(20_000);
      const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
      const l = createLimiter({
        rules: [{ name: 'r', key: constant('k'), algorithm, limit: 2, window: '1s', countRejected: true }],
        store,
        clock,
      });
      await l.consume({});
      await l.consume({});
      clock.advance(300);
      const d = await l.consume({});
      expect(d.allowed).toBe(false);
      expect(d.rules[0]?.remaining).toBe(0);
      const now = clock.now();
      clock.set(now + d.retryAfterMs - 1);
      expect((await l.peek({})).allowed).toBe(false);
      clock.set(now + d.retryAfterMs);
      expect((await l.peek({})).allowed).toBe(true);
      await store.close();
    });
  }

  for (const mode of ['meter', 'queue'] as const) {
    it(`leaky-bucket ${mode}: a fresh key was refused at epoch-sized times when T is fractional (now + T - now > T)`, async () => {
      // T = 0.1 ms; at 1.7e12 ms, (now + 0.1) - now rounds to 0.10009765625.
      const clock = new ManualClock(1_700_000_000_000);
      const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
      const sized = mode === 'meter' ? { burst: 1 } : { mode, queue: 1 };
      const l = createLimiter({
        rules: [{ name: 'r', key: constant('k'), algorithm: 'leaky-bucket', limit: 10, window: 1, ...sized }],
        store,
        clock,
      });
      expect((await l.consume({})).allowed).toBe(true);
      const d = await l.consume({});
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBe(1);
      clock.advance(1);
      expect((await l.consume({})).allowed).toBe(true);
      await store.close();
    });
  }

  it('sanitizeKey: keys differing only in lone surrogates shared one counter (hashed as UTF-8, all became U+FFFD)', async () => {
    const keys = ['a\uD800b', 'a\uDC00b', 'a\uD801b', 'a\uFFFDb'];
    expect(new Set(keys.map(sanitizeKey)).size).toBe(4);
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter<{ k: string }>({ rules: [{ name: 'r', key: (req) => req.k, limit: 1, window: '1h' as const }], store, clock });
    for (const k of keys) expect((await l.consume({ k })).allowed).toBe(true);
    await store.close();
  });

  it('algorithm: null silently fell back to the default algorithm instead of failing', () => {
    expect(() => createLimiter({ rules: [{ name: 'r', rate: '1/s', algorithm: null as never }] })).toThrow(
      expect.objectContaining({ code: 'TG_UNKNOWN_ALGORITHM' }),
    );
  });

  it('token-bucket: resetMs of an admission after the clock stepped back left out the wait until refill resumes', async () => {
    const clock = new ManualClock(10_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter({ rules: [{ name: 'r', key: constant('k'), algorithm: 'token-bucket', rate: '10/s' }], store, clock });
    await l.consume({});
    clock.set(9_000); // back 1 s: the bucket refills again only from 10 000
    const d = await l.consume({});
    expect(d.allowed).toBe(true);
    // Two tokens short at 10 000, refilled at 10 per second: full at 10 200, 1 200 ms from now (the bug said 200).
    expect(d.rules[0]?.resetMs).toBe(1200);
    clock.set(9_000 + 1199);
    expect((await l.peek({})).rules[0]?.remaining).toBe(8);
    clock.set(9_000 + 1200);
    expect((await l.peek({})).rules[0]?.remaining).toBe(9);
    await store.close();
  });

  it('countIf silently switched off skipSuccessful / skipFailed on the same rule', () => {
    const l = createLimiter({
      rules: [
        { name: 'a', rate: '5/min', countIf: (status) => status !== 404, skipFailed: true },
        { name: 'b', rate: '5/min', countIf: (status) => status !== 404, skipSuccessful: true },
      ],
    });
    const [a, b] = l.rules.map((c) => c.countIf as (status: number) => boolean);
    // Counted only when every option the rule names says so.
    expect([200, 404, 500].map((s) => a?.(s))).toEqual([true, false, false]);
    expect([200, 404, 500].map((s) => b?.(s))).toEqual([false, false, true]);
  });

  it("rate '5/constructor' was accepted (the unit lookup found Object's constructor) and refused every request with NaN figures", () => {
    for (const rate of ['5/constructor', '5/2constructor']) {
      expect(() => createLimiter({ rules: [{ name: 'r', rate: rate as Rate }] }), rate).toThrow(
        expect.objectContaining({ code: 'TG_INVALID_RATE' }),
      );
    }
  });

  it('token-bucket and sliding-window accepted limit × window beyond 2^53, where their integer arithmetic rounds', () => {
    for (const algorithm of ['token-bucket', 'sliding-window'] as const) {
      expect(() => createLimiter({ rules: [{ name: 'r', algorithm, limit: 10_000_000_000, window: '1d' }] })).toThrow(
        expect.objectContaining({ code: 'TG_INVALID_LIMIT' }),
      );
      // A large but safe rule is still accepted.
      expect(() => createLimiter({ rules: [{ name: 'r', algorithm, limit: 10_000_000, window: '1d' }] })).not.toThrow();
    }
    // Counting algorithms do not scale: a big daily quota is fine.
    expect(() => createLimiter({ rules: [{ name: 'q', quota: 10_000_000_000, per: 'month' }] })).not.toThrow();
  });

  it('dryRun: a dry-run leaky queue delayed the request it was only meant to watch', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter({
      rules: [
        { name: 'shadow', key: constant('k'), algorithm: 'leaky-bucket', mode: 'queue', limit: 2, window: '1s', dryRun: true },
        { name: 'real', key: constant('k'), limit: 100, window: '1s' },
      ],
      store,
      clock,
    });
    const d = await l.consume({});
    expect(d.allowed).toBe(true);
    expect(d.rules[0]?.delayMs).toBe(500); // reported, so its effect can be watched
    expect(d.delayMs).toBe(0); // but not applied
    await store.close();
  });

  it('MemoryStore: the sweep judged expiry by the last request time, so states were never swept while traffic was idle', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    // No limiter clock: the store decides on its own clock, as in production.
    const l = createLimiter({ rules: [{ name: 'r', key: constant('k'), limit: 1, window: '1s' }], store });
    await l.consume({});
    clock.set(10_000); // idle: no request tells the store the time
    expect(store.sweep()).toBe(1);
    expect(store.size).toBe(0);
    await store.close();
  });

  it('stack: a cost no rule could ever admit still got the retryAfterMs of another rejecting rule (waiting cannot help)', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter<{ n: number }>({
      rules: [
        { name: 'small', key: constant('k'), limit: 5, window: '1s', cost: (req) => req.n },
        { name: 'big', key: constant('k'), limit: 100, window: '1m', cost: (req) => req.n },
      ],
      store,
      clock,
    });
    await l.consume({ n: 99 }); // rejected by small (cost 99 > 5) only
    await l.consume({ n: 5 }); // admitted: big has 95 left
    const d = await l.consume({ n: 96 });
    expect(d.rejectedBy).toEqual(['small', 'big']);
    expect(d.rules[0]?.reason).toBe('cost_exceeds_limit');
    expect(d.rules[1]?.retryAfterMs).toBeGreaterThan(0);
    expect(d.retryAfterMs).toBe(0);
    await store.close();
  });
});
