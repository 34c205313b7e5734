/**
 * RedisStore on a standalone redis-server passes the store conformance suite unchanged
 *, on every client it takes (ioredis, node-redis 5 and 6), and no test
 * leaves a key without expiry (issue 3, item 4; issue 19, item 4). Redis 7 has functions:
 * every call, on every client, is an FCALL of the library.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { CLIENTS, type Connected } from '../setup/clients.js';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { scriptCalls } from '../setup/redis-paths.js';
import { redisStoreContract } from './redis-contract.js';

let server: RedisServer;
let admin: Redis;

beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  // The function path: every call was FCALL (the script fallback: redis-scripts.test.ts).
  const calls = await scriptCalls(admin);
  expect(calls.evalsha).toBe(0);
  expect(calls.fcall).toBeGreaterThan(0);
  admin.disconnect();
  await server.destroy();
});

describe.each(CLIENTS)('$name', (kind) => {
  let c: Connected;
  beforeAll(async () => {
    c = await kind.standalone(server.port);
  });
  afterAll(() => c.close());
  redisStoreContract(
    `RedisStore (standalone, ${kind.name})`,
    `conf:${kind.name.replace(/\W/g, '')}:`,
    () => c.client,
    () => admin,
  );
});
