/**
 * The control scenarios on Express 5 with Redis: `RedisStore` for the limiter and the
 * throttle, `RedisSlotStore` for concurrency slots, a real redis-server, supplied clocks.
 */
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import express5 from 'express';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { expressControlApp } from './express-app.js';
import { controlScenarios } from './suite.js';

let server: RedisServer;
let client: Redis;
let n = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: true });
  await client.connect();
});

afterAll(async () => {
  // Every key the scenarios wrote carries a TTL (leases and limiter state alike).
  expect(await keysWithoutExpiry(client, '*')).toEqual([]);
  client.disconnect();
  await server.destroy();
});

controlScenarios('Express 5, Redis', expressControlApp(express5), async (clock) => {
  const prefix = `s${++n}`;
  const store = new RedisStore({ client, clock, prefix });
  const slots = new RedisSlotStore({ client, clock, prefix: `${prefix}:` });
  return {
    store,
    slots,
    async close() {
      await store.close();
      await slots.close();
    },
  };
});
