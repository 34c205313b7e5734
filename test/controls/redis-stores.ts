/**
 * The Redis stores of a controls test file: a redis-server started for the file on a free
 * port, one client, and per scenario a `RedisStore` (limiter and throttle) and a
 * `RedisSlotStore` (concurrency slots) under a fresh prefix, on the scenario's clock. When the
 * file ends, every key the scenarios wrote must carry a TTL (leases and limiter state alike).
 */
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import type { MakeStores } from './suite.js';

/** Registers the file's server and returns the suite's `makeStores`. */
export function redisControlStores(prefix: string): MakeStores {
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
  return async (clock) => {
    const p = `${prefix}${++n}`;
    const store = new RedisStore({ client, clock, prefix: p });
    const slots = new RedisSlotStore({ client, clock, prefix: `${p}:` });
    return {
      store,
      slots,
      async close() {
        await store.close();
        await slots.close();
      },
    };
  };
}
