/**
 * The HTTP scenario suite on Express 5 and Express 4 with RedisStore (a redis-server
 * started for this file on a free port). Time is the scenarios' ManualClock, passed to
 * the store, so nothing waits for real expiry. Every store call must reach Redis: a
 * failure answered by the store's local fallback would hide a broken script.
 */
import { RedisStore } from '@tollgate/redis';
import express5 from 'express';
import express4 from 'express4';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { expressApp } from './express-app.js';
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

httpScenarios('Express 5, RedisStore', expressApp(express5), makeStore);
httpScenarios('Express 4, RedisStore', expressApp(express4 as unknown as typeof express5), makeStore);
