/**
 * RedisStore on a three-master Redis Cluster passes the store conformance suite unchanged
 * (SPEC 6.1, 6.4): stacks whose keys span slots are decided per slot with refunds on
 * rejection; no test leaves a key without expiry on any master.
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { type RedisCluster, startCluster } from '../setup/redis.js';
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
  client.disconnect();
  await cluster.destroy();
});

redisStoreContract('RedisStore (cluster)', PREFIX, () => client);
