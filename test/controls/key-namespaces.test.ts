/**
 * A client's key never shares storage with a control's own state or with another client's,
 * on MemoryStore / MemorySlotStore and on Redis (the suite's own server): the concurrency
 * limit's global slot against a client whose key is `*`, and the limiter's per-key states
 * (rules, tiers, blocks by operation) against keys that spell another key's stored form.
 */
import { createConcurrency, createLimiter, MemorySlotStore, MemoryStore, type SlotStore, type Store, sanitizeKey } from '@tollgate/core';
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';

type Req = { k: string; plan?: string | undefined };

let server: RedisServer;
let client: Redis;
let n = 0;

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

const stores: Record<string, { slots: () => SlotStore; store: () => Store }> = {
  memory: { slots: () => new MemorySlotStore(), store: () => new MemoryStore() },
  Redis: {
    slots: () => new RedisSlotStore({ client, prefix: `ns${++n}:` }),
    store: () => new RedisStore({ client, prefix: `ns${++n}:` }),
  },
};

for (const [name, make] of Object.entries(stores)) {
  describe(`key namespaces: ${name}`, () => {
    it('concurrency: the client whose key is `*` has its own max, not everyone’s in-flight count', async () => {
      const slots = make.slots();
      const limit = createConcurrency<Req>({ max: 2, global: 100, key: (req) => req.k, store: slots });
      try {
        const others = await Promise.all(['a', 'b', 'c', 'd'].map((k) => limit.acquire({ k })));
        expect(others.map((o) => o?.admitted)).toEqual([true, true, true, true]);
        const star = [await limit.acquire({ k: '*' }), await limit.acquire({ k: '*' })];
        expect(star.map((o) => o?.admitted)).toEqual([true, true]);
        expect((await limit.acquire({ k: '*' }))?.admitted).toBe(false);
        // Both counts are their own: two under `*`, six in flight in all.
        expect(await limit.count({ k: '*' })).toEqual({ key: 2, global: 6 });
        expect(await limit.count({ k: 'a' })).toEqual({ key: 1, global: 6 });
        for (const o of [...others, ...star]) if (o?.admitted) o.release();
        await expect.poll(async () => (await limit.count({ k: '*' })).global).toBe(0);
      } finally {
        await limit.close();
        await slots.close();
      }
    });

    it('concurrency: `*` in flight never fills the global limit for everyone else', async () => {
      const slots = make.slots();
      const limit = createConcurrency<Req>({ max: 3, global: 4, key: (req) => req.k, store: slots });
      try {
        const star = await Promise.all([1, 2, 3].map(() => limit.acquire({ k: '*' })));
        expect(star.map((o) => o?.admitted)).toEqual([true, true, true]);
        // One global place is left, and a client other than `*` takes it.
        expect((await limit.acquire({ k: 'a' }))?.admitted).toBe(true);
        const full = await limit.acquire({ k: 'b' });
        expect(full?.admitted === false && full.reason !== 'aborted' ? full.scope : undefined).toBe('global');
        expect(await limit.count({ k: '*' })).toEqual({ key: 3, global: 4 });
      } finally {
        await limit.close();
        await slots.close();
      }
    });

    it('limiter: a key spelling another key’s stored form, or `*`, has its own state (rules, tiers, blocks)', async () => {
      const store = make.store();
      // One instant, 1 s into a minute: two requests of one key never straddle a window's end
      // (the sliding window admits again just after it when the first came just before).
      const at = Math.floor(Date.now() / 60_000) * 60_000 + 1_000;
      const limiter = createLimiter<Req>({
        clock: { now: () => at },
        rules: [],
        tiers: {
          free: [{ name: 'free', key: (req: Req) => req.k, limit: 1, window: '1m' }],
          pro: [{ name: 'pro', key: (req: Req) => req.k, limit: 1, window: '1m' }],
        },
        tier: (req: Req) => req.plan ?? 'free',
        store,
      });
      try {
        const spaced = 'GET /users';
        const stored = sanitizeKey(spaced);
        expect(stored).not.toBe(spaced);
        for (const plan of [undefined, 'pro']) {
          expect((await limiter.consume({ k: spaced, plan })).allowed).toBe(true);
          expect((await limiter.consume({ k: spaced, plan })).allowed).toBe(false);
          // The hashed form typed by a client is a different key, and so is `*`.
          expect((await limiter.consume({ k: stored, plan })).allowed).toBe(true);
          expect((await limiter.consume({ k: '*', plan })).allowed).toBe(true);
        }
        // A block by operation on `*` blocks `*` alone.
        await limiter.block('free', '*', '1m');
        expect((await limiter.get('free', '*')).blocked).toBe(true);
        expect((await limiter.consume({ k: 'fresh' })).allowed).toBe(true);
        expect((await limiter.get('free', 'fresh')).blocked).toBe(false);
      } finally {
        await store.close();
      }
    });
  });
}
