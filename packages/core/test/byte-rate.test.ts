/**
 * limitRate's core: sizes as people write them, the byte bucket shared by a key's
 * responses (exact on the manual clock), refunds, a failing store, and the textbook case
 * (B = 16 MB, R = 2 MB/s, link M = 10 MB/s) on a simulated link.
 */
import { describe, expect, it } from 'vitest';
import {
  type ByteGrant,
  createByteRate,
  ManualClock,
  ManualTimers,
  MemoryStore,
  parseByteRate,
  parseSize,
  type Store,
  TollgateError,
} from '../src/index.js';

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof TollgateError ? err.code : `not a TollgateError: ${String(err)}`;
  }
  return undefined;
}

describe('sizes and byte rates', () => {
  it.each([
    ['512KB', 512_000],
    ['16MB', 16_000_000],
    ['2MiB', 2_097_152],
    ['100KiB', 102_400],
    ['1.5MB', 1_500_000],
    ['2 GB', 2_000_000_000],
    ['10B', 10],
    ['1TiB', 2 ** 40],
    [4096, 4096],
  ])('reads %s as %d bytes', (text, bytes) => {
    expect(parseSize(text, 'burst')).toBe(bytes);
  });

  it.each([
    ['2MB/s', 2_000_000],
    ['512KiB/s', 524_288],
    ['1 MB/sec', 1_000_000],
    ['64kB/second', 64_000],
    [1000, 1000],
  ])('reads the rate %s as %d bytes per second', (text, bytes) => {
    expect(parseByteRate(text, 'rate')).toBe(bytes);
  });

  it.each([
    0,
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    2 ** 40 + 1,
    '0MB',
    '-1MB',
    '2Mb',
    '512kb',
    '10b',
    '16',
    '16 XB',
    '2TiB',
    null,
    {},
  ])('refuses the size %s with TG_INVALID_SIZE', (v) => {
    expect(code(() => parseSize(v, 'burst'))).toBe('TG_INVALID_SIZE');
  });

  it.each([0, -5, '0MB/s', '2MB', '2MB/min', '2Mb/s', '2TiB/s', 'fast', undefined])('refuses the rate %s with TG_INVALID_SIZE', (v) => {
    expect(code(() => parseByteRate(v, 'rate'))).toBe('TG_INVALID_SIZE');
  });

  it('says bits are written with a lower-case b, and where', () => {
    try {
      parseByteRate('2Mb/s', 'limitRate.rate');
      expect.unreachable();
    } catch (err) {
      expect((err as TollgateError).path).toBe('limitRate.rate');
      expect((err as TollgateError).fix).toContain('divide by 8');
    }
  });

  it('allows after to be 0 and nothing else to be', () => {
    expect(parseSize(0, 'after', 0)).toBe(0);
    expect(code(() => createByteRate({ rate: '1MB/s', after: 0 }))).toBeUndefined();
    expect(code(() => createByteRate({ rate: '1MB/s', burst: 0 }))).toBe('TG_INVALID_SIZE');
    expect(code(() => createByteRate({ rate: 0 as never }))).toBe('TG_INVALID_SIZE');
    expect(code(() => createByteRate({ rate: '1MB/s', after: -1 }))).toBe('TG_INVALID_SIZE');
    expect(code(() => createByteRate({ rate: '1MB/s', burts: '1MB' } as never))).toBe('TG_UNKNOWN_OPTION');
  });
});

/** A control on the manual clock whose responses all share the key 'k'. */
function setup(o: { rate: number; burst: number; store?: Store }) {
  const clock = new ManualClock(1_000_000);
  const timers = new ManualTimers(clock);
  const limit = createByteRate<unknown>({ ...o, key: () => 'k', clock, timers });
  return { clock, timers, limit };
}

/** Takes as much as is granted now (synchronously), up to `max`. */
function drain(g: ByteGrant, max = Number.POSITIVE_INFINITY): number {
  let got = 0;
  for (;;) {
    let n = 0;
    let waiting = true;
    g.take(Math.min(1_000_000, max - got), (k) => {
      n = k;
      waiting = false;
    });
    if (waiting) {
      g.close();
      return got;
    }
    got += n;
    if (got >= max) return got;
  }
}

describe('the byte bucket', () => {
  it('defaults burst to one second of rate, and takes 50 ms of rate per store call', () => {
    const { limit } = setup({ rate: 2_000_000, burst: 16_000_000 });
    expect(limit.chunk).toBe(65_536);
    expect(createByteRate({ rate: '400KB/s' }).burst).toBe(400_000);
    expect(createByteRate({ rate: '400KB/s' }).chunk).toBe(20_000);
    expect(createByteRate({ rate: '1KB/s', burst: 100 }).chunk).toBe(100);
  });

  it('grants the burst at once, then exactly rate per second, to responses of a key in turn', async () => {
    const { clock, timers, limit } = setup({ rate: 10_000, burst: 4_000 });
    const a = (await limit.open({})) as ByteGrant;
    const b = (await limit.open({})) as ByteGrant;
    const got = { a: 0, b: 0 };
    const order: string[] = [];
    const want = (g: ByteGrant, name: 'a' | 'b') => {
      g.take(1_000_000, (n) => {
        got[name] += n;
        order.push(name);
        if (clock.now() < 1_001_000) want(g, name);
      });
    };
    want(a, 'a');
    want(b, 'b');
    // The burst went at once (to the first response that asked, in chunks of 500 B: 50 ms of rate).
    expect(got.a + got.b).toBe(4_000);
    const before = { ...got };
    order.length = 0;
    await timers.advance(1000, 0);
    // One second later: burst + rate, never more, shared evenly between the two.
    expect(got.a + got.b).toBe(14_000);
    expect(Math.abs(got.a - before.a - (got.b - before.b))).toBeLessThanOrEqual(limit.chunk);
    expect(order.slice(0, 6)).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    a.close();
    b.close();
    expect(limit.active).toEqual({ responses: 0, keys: 0 });
  });

  it('gives unused bytes back to the store when the last response of a key ends', async () => {
    const { limit } = setup({ rate: 1000, burst: 1000 });
    const g1 = (await limit.open({})) as ByteGrant;
    let n = 0;
    g1.take(256, (k) => {
      n = k;
    });
    expect(n).toBe(256);
    // Only 100 of them left before the response ended: 156 go back to the bucket.
    g1.close(156);
    await Promise.resolve();
    const g2 = (await limit.open({})) as ByteGrant;
    expect(drain(g2)).toBe(900);
  });

  it('gives granted bytes a response never sent back to its key', async () => {
    const { limit } = setup({ rate: 1000, burst: 1000 });
    const g1 = (await limit.open({})) as ByteGrant;
    const g2 = (await limit.open({})) as ByteGrant;
    let n = 0;
    g1.take(256, (k) => {
      n = k;
    });
    expect(n).toBe(256);
    g1.close(256);
    expect(drain(g2)).toBe(1000);
  });

  it('lets bytes through unpaced when the store fails, and opens nothing for an absent key', async () => {
    const failing = {
      consume: () => Promise.reject(new Error('down')),
      peek: () => Promise.reject(new Error('down')),
      refund: () => Promise.resolve(),
      reset: () => Promise.resolve(),
      close: () => Promise.resolve(),
    } as unknown as Store;
    const limit = createByteRate<unknown>({ rate: 1000, store: failing, key: () => 'k' });
    const g = (await limit.open({})) as ByteGrant;
    const n = await new Promise<number>((resolve) => g.take(50_000, resolve));
    expect(n).toBe(50_000);
    g.close();
    const none = createByteRate<unknown>({ rate: 1000, key: () => undefined });
    expect(await none.open({})).toBeUndefined();
  });

  it('bounds keys by the memory store like every other key', async () => {
    const store = new MemoryStore({ maxKeys: 100 });
    let i = 0;
    const limit = createByteRate<unknown>({ rate: 1000, store, key: () => `k${i++}` });
    for (let j = 0; j < 1000; j++) {
      const g = (await limit.open({})) as ByteGrant;
      g.take(10, () => {});
      g.close();
    }
    expect(limit.active).toEqual({ responses: 0, keys: 0 });
    expect(store.size).toBeLessThanOrEqual(100);
    await store.close();
  });
});

/**
 * The textbook case on a simulated link: a sender that could push M bytes per second draws
 * from the key's bucket in 10 ms steps. Returns cumulative bytes at each step.
 */
async function textbook(seconds: number): Promise<Array<[number, number]>> {
  const { clock, timers, limit } = setup({ rate: 2_000_000, burst: 16_000_000 });
  const g = (await limit.open({})) as ByteGrant;
  const M = 10_000_000;
  const step = 10;
  let credit = 0;
  let pending = false;
  let sent = 0;
  const curve: Array<[number, number]> = [[0, 0]];
  for (let t = step; t <= seconds * 1000; t += step) {
    let cap = (M * step) / 1000;
    for (;;) {
      const s = Math.min(credit, cap);
      sent += s;
      credit -= s;
      cap -= s;
      if (cap === 0 || pending) break;
      pending = true;
      g.take(cap, (n) => {
        pending = false;
        credit += n;
      });
      if (pending) break;
    }
    await timers.advance(step, 0);
    curve.push([t, sent]);
  }
  g.close();
  expect(clock.now()).toBe(1_000_000 + seconds * 1000);
  return curve;
}

describe('the textbook case: B = 16 MB, R = 2 MB/s, M = 10 MB/s', () => {
  it('runs at link speed for B / (M - R) = 2 s, then at R', async () => {
    const curve = await textbook(4);
    const at = (ms: number) => (curve.find(([t]) => t === ms) as [number, number])[1];
    // Full speed: 10 MB/s for 2 s (a chunk of 64 KiB either way).
    expect(at(1000)).toBe(10_000_000);
    expect(Math.abs(at(2000) - 20_000_000)).toBeLessThanOrEqual(65_536);
    // Then the refill rate: 2 MB per second.
    expect(Math.abs(at(3000) - at(2000) - 2_000_000)).toBeLessThanOrEqual(65_536);
    expect(Math.abs(at(4000) - at(3000) - 2_000_000)).toBeLessThanOrEqual(65_536);
    // B + R·T over every window.
    for (const [ti, bi] of curve)
      for (const [tj, bj] of curve) if (tj > ti) expect(bj - bi).toBeLessThanOrEqual(16_000_000 + 2000 * (tj - ti) + 65_536);
  });
});
