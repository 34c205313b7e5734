/**
 * The HTTP scenario suite on Koa 3 with RedisStore (a redis-server started for this file
 * on a free port) and the scenarios' ManualClock. Every store call must reach Redis: a
 * failure answered by the store's local fallback would hide a broken script.
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { koaApp } from './koa-app.js';
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

httpScenarios('Koa 3, RedisStore', koaApp(), async (clock) => {
  // A fresh prefix per scenario keeps scenarios independent on one server.
  const store = new RedisStore({ client, prefix: `ksc${++n}:`, clock, timeoutMs: 2000 });
  store.on('error', (e) => failures.push(e));
  return { store, close: () => store.close() };
});
