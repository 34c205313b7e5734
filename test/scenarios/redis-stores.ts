/**
 * The RedisStore of a scenario file: a redis-server started for the file on a free port,
 * one client, and a store per scenario on it with a fresh prefix (scenarios stay
 * independent on one server) and the scenario's ManualClock. Every store call must reach
 * Redis: a failure answered by the store's local fallback would hide a broken script, so
 * the file fails if any store reported an error.
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';

/** Registers the file's server and returns the suite's `makeStore`; `denyCache: false` where a route's stack is one decision. */
export function redisStores(prefix: string, options: { denyCache?: false } = {}) {
  let server: RedisServer;
  let client: Redis;
  let n = 0;
  const failures: unknown[] = [];
  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ port: server.port, host: '127.0.0.1' });
  });
  afterAll(async () => {
    expect(failures).toEqual([]);
    client.disconnect();
    await server.destroy();
  });
  return async (clock: { now(): number }) => {
    const store = new RedisStore({ client, prefix: `${prefix}${++n}:`, clock, timeoutMs: 2000, ...options });
    store.on('error', (e) => failures.push(e));
    return { store, close: () => store.close() };
  };
}
