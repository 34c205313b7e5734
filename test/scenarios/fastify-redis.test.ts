/**
 * The HTTP scenario suite on Fastify 5 with RedisStore (a redis-server started for this
 * file on a free port), over sockets and via `app.inject`. Time is the scenarios'
 * ManualClock, passed to the store, so nothing waits for real expiry. Every store call
 * must reach Redis: a failure answered by the store's local fallback would hide a
 * broken script.
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { fastifyApp } from './fastify-app.js';
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
  // A fresh prefix per scenario keeps scenarios independent on one server. The deny cache
  // is off: a route's stack is one decision here, and the cache answers a repeat of a
  // refused stack with that refusal's figures (docs of packages/redis/src/deny-cache.ts),
  // so a scenario that spends another rule of the stack in between would see the rules
  // named by the earlier refusal. The Express Redis run covers the cache.
  const store = new RedisStore({ client, prefix: `fsc${++n}:`, clock, timeoutMs: 2000, denyCache: false });
  store.on('error', (e) => failures.push(e));
  return { store, close: () => store.close() };
};

httpScenarios('Fastify 5 over sockets, RedisStore', fastifyApp('socket'), makeStore);
httpScenarios('Fastify 5 via app.inject, RedisStore', fastifyApp('inject'), makeStore);
