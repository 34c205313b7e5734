/**
 * RedisStore on a standalone redis-server passes the store conformance suite unchanged
 * (SPEC 6.1, 6.3), and no test leaves a key without expiry (issue 3, item 4).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { redisStoreContract } from './redis-contract.js';

const PREFIX = 'conf:';
let server: RedisServer;
let client: Redis;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: false });
});

afterAll(async () => {
  client.disconnect();
  await server.destroy();
});

redisStoreContract('RedisStore (standalone)', PREFIX, () => client);
