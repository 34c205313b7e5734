/**
 * RedisStore on a three-master Redis Cluster passes the store conformance suite unchanged
 * (SPEC 6.1, 6.4): stacks whose keys span slots are decided per slot with refunds on
 * rejection; no test leaves a key without expiry on any master.
 */
import { RedisStore } from '@tollgate/redis';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { keysWithoutExpiry, type RedisCluster, startCluster } from '../setup/redis.js';
import { storeContract } from './store-contract.js';

const PREFIX = 'cconf:';
let cluster: RedisCluster;
let client: Cluster;

beforeAll(async () => {
  cluster = await startCluster();
  client = new Cluster(cluster.startupNodes);
  await client.ping();
});

afterAll(async () => {
  client.disconnect();
  await cluster.destroy();
});

// A failing Redis call would be answered by the local fallback, which decides like
// MemoryStore and could hide a broken script: every store call must reach Redis.
const failures: unknown[] = [];

storeContract(
  'RedisStore (cluster)',
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
