/**
 * The HTTP scenario suite on NestJS 12 with RedisStore (a redis-server started for this
 * file on a free port), on Nest's Express and Fastify platforms. Time is the scenarios'
 * ManualClock, passed to the store. Every store call must reach Redis.
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { nestApp } from './nestjs-app.js';
import { httpScenarios } from './scenarios.js';

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

const makeStore = async (clock: { now(): number }) => {
  // A handler's stack is one decision, as on Fastify: the deny cache is off for the
  // reason given in fastify-redis.test.ts; the Express Redis run covers the cache.
  const store = new RedisStore({ client, prefix: `nsc${++n}:`, clock, timeoutMs: 2000, denyCache: false });
  store.on('error', (e) => failures.push(e));
  return { store, close: () => store.close() };
};

httpScenarios('NestJS on Express, RedisStore', nestApp('express'), makeStore);
httpScenarios('NestJS on Fastify, RedisStore', nestApp('fastify'), makeStore);
