/**
 * The HTTP scenario suite on plain node:http (@tollgate/node) with RedisStore (a
 * redis-server started for this file on a free port) and the scenarios' ManualClock.
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { nodeApp } from './node-app.js';
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

httpScenarios('node:http, RedisStore', nodeApp, async (clock) => {
  // A fresh prefix per scenario keeps scenarios independent on one server.
  const store = new RedisStore({ client, prefix: `nsc${++n}:`, clock, timeoutMs: 2000 });
  store.on('error', (e) => failures.push(e));
  return { store, close: () => store.close() };
});
