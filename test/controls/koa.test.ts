/**
 * The control scenarios on Koa 3 (memory stores and Redis) and Koa 2 (memory stores).
 */
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import Koa2 from 'koa2';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { koaControlApp } from './koa-app.js';
import { controlScenarios } from './suite.js';

controlScenarios('Koa 3, memory stores', koaControlApp());
controlScenarios('Koa 2, memory stores', koaControlApp(Koa2));

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

controlScenarios('Koa 3, Redis', koaControlApp(), async (clock) => {
  const prefix = `k${++n}`;
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
