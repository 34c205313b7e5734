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

storeContract('RedisStore (cluster)', (clock) => new RedisStore({ client, prefix: PREFIX, clock, timeoutMs: 2000 }), {
  afterEach: async () => {
    expect(await keysWithoutExpiry(client, `${PREFIX}*`)).toEqual([]);
  },
});
