/**
 * The control scenarios on Hono 4 on @hono/node-server, memory stores and Redis.
 */
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { honoControlApp } from './hono-app.js';
import { controlScenarios } from './suite.js';

controlScenarios('Hono 4 on @hono/node-server, memory stores', honoControlApp);

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

controlScenarios('Hono 4 on @hono/node-server, Redis', honoControlApp, async (clock) => {
  const prefix = `h${++n}`;
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
