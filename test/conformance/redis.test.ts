/**
 * RedisStore on a standalone redis-server passes the store conformance suite unchanged
 * (SPEC 6.1, 6.3), and no test leaves a key without expiry (issue 3, item 4).
 */
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { storeContract } from './store-contract.js';

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

// A failing Redis call would be answered by the local fallback, which decides like
// MemoryStore and could hide a broken script: every store call must reach Redis.
const failures: unknown[] = [];

storeContract(
  'RedisStore (standalone)',
  (clock) => {
    const store = new RedisStore({ client, prefix: PREFIX, clock, timeoutMs: 2000 });
    store.on('error', (e) => failures.push(e));
    return store;
  },
  {
    afterEach: async () => {
      expect(failures.splice(0)).toEqual([]);
      expect(await keysWithoutExpiry(client, `${PREFIX}*`)).toEqual([]);
    },
  },
);
