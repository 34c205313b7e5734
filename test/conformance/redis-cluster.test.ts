/**
 * RedisStore on a three-master Redis Cluster passes the store conformance suite unchanged
 * (SPEC 6.1, 6.4): stacks whose keys span slots are decided per slot with refunds on
 * rejection; no test leaves a key without expiry on any master.
 */
import { STORE_LIBRARY_NAME } from '@tollgate/redis';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { type RedisCluster, startCluster } from '../setup/redis.js';
import { scriptCalls } from '../setup/redis-paths.js';
import { redisStoreContract } from './redis-contract.js';

const PREFIX = 'cconf:';
let cluster: RedisCluster;
let client: Cluster;

beforeAll(async () => {
  cluster = await startCluster();
  client = new Cluster(cluster.startupNodes);
  await client.ping();
});

afterAll(async () => {
  // The function path, with the library on every master (the fallback: redis-scripts.test.ts).
  for (const node of client.nodes('master')) {
    expect(await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)).toHaveLength(1);
    expect((await scriptCalls(node)).evalsha).toBe(0);
  }
  client.disconnect();
  await cluster.destroy();
});

redisStoreContract('RedisStore (cluster)', PREFIX, () => client);
