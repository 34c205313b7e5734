/**
 * limitRate over a RedisStore: two app instances share a key's bucket. Bytes are taken in
 * chunks (one atomic call per chunk, never per write) and every instance's responses
 * together stay within burst + rate·T.
 */
import { type ByteGrant, createByteRate, ManualClock } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../controls/http.js';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { nodeShapingApp } from './apps.js';
import { download, merged, worstExcess } from './client.js';

let server: RedisServer;
let client: Redis;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: true });
  await client.connect();
});

afterAll(async () => {
  expect(await keysWithoutExpiry(client, '*')).toEqual([]);
  client.disconnect();
  await server.destroy();
});

/** A RedisStore whose consume calls are counted (the store itself is untouched). */
function countedStore(): { store: RedisStore; calls: () => number } {
  const store = new RedisStore({ client, prefix: 'shape' });
  let calls = 0;
  const consume = store.consume.bind(store);
  store.consume = (ops, now) => {
    calls++;
    return consume(ops, now);
  };
  return { store, calls: () => calls };
}

describe('limitRate on a RedisStore shared by two instances', () => {
  it('keeps one key within burst + rate·T across both, taking chunks', async () => {
    const one = countedStore();
    const two = countedStore();
    const a = await nodeShapingApp({ rate: '400KB/s', burst: '100KB', store: one.store });
    const b = await nodeShapingApp({ rate: '400KB/s', burst: '100KB', store: two.store });
    try {
      const t0 = performance.now();
      const ds = await Promise.all([a, b, a, b].map((app, i) => download(app.port, i % 2 ? '/buf?n=100000' : '/stream?n=100000', { t0 })));
      for (const d of ds) expect(d.bytes).toBe(100_000);
      expect(worstExcess(merged(ds), 100_000, 400_000, 100)).toBeLessThanOrEqual(0);
      expect(Math.max(...ds.map((d) => d.ms))).toBeGreaterThanOrEqual(((400_000 - 100_000) / 400_000) * 1000 * 0.98);
      // 400 KB in chunks of 20 KB: about 20 admitted calls and the refused ones beside them,
      // far from one call per write (the streams alone write 16 KiB pieces: 13 each).
      const calls = one.calls() + two.calls();
      expect(calls).toBeGreaterThanOrEqual(20);
      expect(calls).toBeLessThanOrEqual(80);
      await until(() => a.limit().active.responses === 0 && b.limit().active.responses === 0, 'every response closed');
    } finally {
      await a.close();
      await b.close();
      await one.store.close();
      await two.store.close();
    }
  });

  it("gives a response's unused bytes back to Redis when it ends", async () => {
    // A clock that stands still: no refill, so the bucket shows exactly what was kept.
    const clock = new ManualClock(1_000_000);
    const store = new RedisStore({ client, prefix: 'shape-refund', clock });
    const limit = createByteRate<unknown>({ rate: '400KB/s', burst: '100KB', store, clock, key: () => 'k' });
    try {
      const g = (await limit.open({})) as ByteGrant;
      expect(await new Promise((resolve) => g.take(20_000, resolve))).toBe(20_000);
      expect((await limit.figures({}))?.remaining).toBe(80_000);
      // 5 KB of the 20 KB granted left before the response ended: 15 KB go back.
      g.close(15_000);
      await until(async () => (await limit.figures({}))?.remaining === 95_000, 'the refund');
    } finally {
      await limit.close();
      await store.close();
    }
  });
});
