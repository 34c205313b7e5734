import { constant, createThrottle, ManualClock, MemoryStore, TollgateError, throttleDecision } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

function setup(options: Record<string, unknown>) {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock });
  const throttle = createThrottle({ key: constant('k'), store, clock, ...options } as never);
  return { clock, store, throttle };
}

async function burst(throttle: ReturnType<typeof createThrottle>, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await throttle.hit({}))?.delayMs ?? -1);
  return out;
}

describe('throttle (SPEC 8.1)', () => {
  it('window 10 s, delayAfter 2, delay 5000: five at once are 0, 0, 5 s, 5 s, 5 s', async () => {
    const { throttle, store } = setup({ window: '10s', delayAfter: 2, delay: 5000 });
    expect(await burst(throttle, 5)).toEqual([0, 0, 5000, 5000, 5000]);
    await store.close();
  });

  it('delay hits^2 s after 2: 0, 0, 9 s, 16 s, and the same every 15 s because the window forgets', async () => {
    const { throttle, clock, store } = setup({ window: '10s', delayAfter: 2, delay: (hits: number) => hits * hits * 1000 });
    for (let round = 0; round < 4; round++) {
      expect(await burst(throttle, 4)).toEqual([0, 0, 9000, 16000]);
      clock.advance(15_000);
    }
    await store.close();
  });

  it('counts arrivals of the last window only: an arrival exactly one window old has left', async () => {
    const { throttle, clock, store } = setup({ window: 1000, delayAfter: 1, delay: 100 });
    expect((await throttle.hit({}))?.hits).toBe(1);
    clock.advance(999);
    expect((await throttle.hit({}))?.hits).toBe(2);
    clock.advance(1);
    const t = await throttle.hit({});
    expect(t?.hits).toBe(2);
    expect(t?.delayMs).toBe(100);
    await store.close();
  });

  it('default delay is incremental (hits - delayAfter) s, clamped to maxDelay', async () => {
    const { throttle, store } = setup({ window: '1m', delayAfter: 1, maxDelay: 2500 });
    expect(await burst(throttle, 5)).toEqual([0, 1000, 2000, 2500, 2500]);
    await store.close();
  });

  it('default maxDelay is finite (60 s)', async () => {
    const { throttle, store } = setup({ window: '1m', delayAfter: 0, delay: () => Number.POSITIVE_INFINITY });
    expect(throttle.maxDelayMs).toBe(60_000);
    expect(await burst(throttle, 1)).toEqual([60_000]);
    await store.close();
  });

  it('a delay function returning NaN or a negative number is clamped (NaN throttles as hard as allowed)', async () => {
    const { throttle, store } = setup({ window: '1m', delayAfter: 0, maxDelay: 700, delay: (h: number) => (h === 1 ? Number.NaN : -5) });
    expect(await burst(throttle, 2)).toEqual([700, 0]);
    await store.close();
  });

  it("reports the throttle's own figures, never zeros: limit = delayAfter, remaining, window, reset", async () => {
    const { throttle, store } = setup({ window: '10s', delayAfter: 2, delay: 5000, name: 'sd' });
    const first = await throttle.hit({});
    expect(first?.saturated).toBe(false);
    expect(first?.result).toEqual({
      name: 'sd',
      allowed: true,
      limit: 2,
      remaining: 1,
      windowMs: 10_000,
      resetMs: 10_000,
      retryAfterMs: 0,
      delayMs: 0,
    });
    await throttle.hit({});
    const third = await throttle.hit({});
    expect(third?.result).toMatchObject({ remaining: 0, delayMs: 5000, limit: 2, windowMs: 10_000, resetMs: 10_000 });
    await store.close();
  });

  it('skip and absent keys neither count nor delay', async () => {
    const clock = new ManualClock(0);
    const store = new MemoryStore({ clock });
    const throttle = createThrottle<{ id?: string; skip?: boolean }>({
      window: '10s',
      delayAfter: 0,
      delay: 100,
      key: (r) => r.id,
      skip: (r) => r.skip === true,
      store,
      clock,
    });
    expect(await throttle.hit({})).toBeUndefined();
    expect(await throttle.hit({ id: 'a', skip: true })).toBeUndefined();
    expect((await throttle.hit({ id: 'a' }))?.hits).toBe(1);
    expect((await throttle.hit({ id: 'b' }))?.hits).toBe(1);
    await throttle.reset({ id: 'a' });
    expect((await throttle.hit({ id: 'a' }))?.hits).toBe(1);
    await store.close();
  });

  it('keeps at most one log entry per distinct millisecond (memory bound)', async () => {
    const { throttle, clock, store } = setup({ window: '10s', delayAfter: 1000 });
    for (let ms = 0; ms < 5; ms++) {
      for (let i = 0; i < 100; i++) await throttle.hit({});
      clock.advance(1);
    }
    expect((await throttle.hit({}))?.hits).toBe(501);
    await store.close();
  });

  it('maxHits bounds the log: past it the key is saturated for one window, then counted afresh', async () => {
    const { throttle, clock, store } = setup({ window: '10s', delayAfter: 1, maxHits: 3, delay: (hits: number) => hits * 100 });
    const seen = [];
    for (let i = 0; i < 5; i++) {
      const t = await throttle.hit({});
      seen.push([t?.hits, t?.saturated, t?.delayMs]);
      clock.advance(1000);
    }
    expect(seen).toEqual([
      [1, false, 0],
      [2, false, 200],
      [3, false, 300],
      [4, true, 400], // the log is full: saturated, and blocked for one window
      [4, true, 400],
    ]);
    clock.set(1_000_000 + 3000 + 9999);
    expect((await throttle.hit({}))?.saturated).toBe(true);
    clock.advance(1); // one window after saturation: every logged arrival has left too
    expect(await throttle.hit({})).toMatchObject({ hits: 1, saturated: false, delayMs: 0 });
    await store.close();
  });

  it('a flood from one key costs bounded time per decision (the log never exceeds maxHits)', async () => {
    const { throttle, clock, store } = setup({ window: '1m', delayAfter: 2, maxHits: 100 });
    const started = performance.now();
    for (let i = 0; i < 20_000; i++) {
      await throttle.hit({});
      clock.advance(1);
    }
    // 20 000 arrivals in one window: uncapped, the log would hold 20 000 entries and each
    // decision would walk them all; capped, it stays at 100.
    expect(performance.now() - started).toBeLessThan(2000);
    await store.close();
  });

  it('rejects bad options at construction with stable codes', () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ window: '10s' }, 'TG_INVALID_LIMIT'],
      [{ window: '10s', delayAfter: -1 }, 'TG_INVALID_LIMIT'],
      [{ window: 'soon', delayAfter: 1 }, 'TG_INVALID_DURATION'],
      [{ window: '10s', delayAfter: 1, maxDelay: 2 ** 31 }, 'TG_INVALID_DURATION'],
      [{ window: '10s', delayAfter: 1, delay: 'slow' }, 'TG_INVALID_OPTION'],
      [{ window: '10s', delayAfter: 1, dealy: 5 }, 'TG_UNKNOWN_OPTION'],
      [{ window: '10s', delayAfter: 1, skip: true }, 'TG_INVALID_OPTION'],
      [{ window: '10s', delayAfter: 5, maxHits: 5 }, 'TG_INVALID_LIMIT'],
    ];
    for (const [o, code] of bad) {
      let err: unknown;
      try {
        createThrottle(o as never);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(o)).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code, JSON.stringify(o)).toBe(code);
    }
  });
});

describe('throttleDecision', () => {
  it('is an admitted decision delayed by the throttle, with its figures as the one rule', async () => {
    const { throttle, clock, store } = setup({ window: '10s', delayAfter: 1, delay: 700 });
    await throttle.hit({});
    const t = await throttle.hit({});
    if (t === undefined) throw new Error('expected a throttle result');
    expect(throttleDecision(t, clock.now())).toEqual({
      allowed: true,
      delayMs: 700,
      retryAfterMs: 0,
      rejectedBy: [],
      dryRunRejectedBy: [],
      rules: [t.result],
      at: 1_000_000,
    });
    await store.close();
  });
});
