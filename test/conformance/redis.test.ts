/**
 * RedisStore on a standalone redis-server passes the store conformance suite unchanged
 * (SPEC 6.1, 6.3), and no test leaves a key without expiry (issue 3, item 4). Redis 7 has
 * functions: every call is an FCALL of the library.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { scriptCalls } from '../setup/redis-paths.js';
import { redisStoreContract } from './redis-contract.js';

const PREFIX = 'conf:';
let server: RedisServer;
let client: Redis;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: false });
});

afterAll(async () => {
  // The function path: every call was FCALL (the script fallback: redis-scripts.test.ts).
  const calls = await scriptCalls(client);
  expect(calls.evalsha).toBe(0);
  expect(calls.fcall).toBeGreaterThan(0);
  client.disconnect();
  await server.destroy();
});

redisStoreContract('RedisStore (standalone)', PREFIX, () => client);
