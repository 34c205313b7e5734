/**
 * The HTTP scenario suite on Hono 4 on @hono/node-server with RedisStore (a redis-server
 * started for this file on a free port). Time is the scenarios' ManualClock, passed to
 * the store, so nothing waits for real expiry. Every store call must reach Redis: a
 * failure answered by the store's local fallback would hide a broken script.
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { honoApp } from './hono-app.js';
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
  // A fresh prefix per scenario keeps scenarios independent on one server.
  const store = new RedisStore({ client, prefix: `sc${++n}:`, clock, timeoutMs: 2000 });
  store.on('error', (e) => failures.push(e));
  return { store, close: () => store.close() };
};

httpScenarios('Hono on @hono/node-server, RedisStore', honoApp, makeStore);
