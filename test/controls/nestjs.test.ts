/**
 * The control scenarios on NestJS, on its Express and Fastify platforms: memory stores, and
 * Redis on the Express platform (the stores are the platform's business no more than the
 * controls' flows are).
 */
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { nestControlApp } from './nestjs-app.js';
import { controlScenarios } from './suite.js';

controlScenarios('NestJS on Express, memory stores', nestControlApp('express'));
controlScenarios('NestJS on Fastify, memory stores', nestControlApp('fastify'));

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

controlScenarios('NestJS on Express, Redis', nestControlApp('express'), async (clock) => {
  const prefix = `n${++n}`;
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
