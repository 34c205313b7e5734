/**
 * RedisStore on its script fallback passes the store conformance suite unchanged, on a
 * standalone server and on a three-master Cluster: the client logs in as an ACL user that
 * may not use FUNCTION, so every call is EVALSHA (checked on the servers' command counts).
 * The function path runs the same suite in redis.test.ts and redis-cluster.test.ts.
 */
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';
import { addScriptsUser, loginFor, scriptCalls } from '../setup/redis-paths.js';
import { redisStoreContract } from './redis-contract.js';

describe('standalone', () => {
  let server: RedisServer;
  let client: Redis;
  let admin: Redis;

  beforeAll(async () => {
    server = await startRedis();
    await addScriptsUser(server.port);
    client = new Redis({ port: server.port, host: '127.0.0.1', ...loginFor('scripts') });
    admin = new Redis({ port: server.port, host: '127.0.0.1' });
  });

  afterAll(async () => {
    const calls = await scriptCalls(admin);
    expect(calls.fcall).toBe(0);
    expect(calls.evalsha).toBeGreaterThan(0);
    client.disconnect();
    admin.disconnect();
    await server.destroy();
  });

  redisStoreContract(
    'RedisStore (standalone, scripts)',
    'sconf:',
    () => client,
    () => admin,
  );
});

describe('cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  let admin: Cluster;

  beforeAll(async () => {
    cluster = await startCluster();
    for (const n of cluster.nodes) await addScriptsUser(n.port);
    client = new Cluster(cluster.startupNodes, { redisOptions: loginFor('scripts') });
    await client.ping();
    admin = new Cluster(cluster.startupNodes);
    await admin.ping();
  });

  afterAll(async () => {
    let fcall = 0;
    let evalsha = 0;
    for (const n of cluster.nodes) {
      const admin = new Redis({ port: n.port, host: '127.0.0.1' });
      const calls = await scriptCalls(admin);
      admin.disconnect();
      fcall += calls.fcall;
      evalsha += calls.evalsha;
    }
    expect(fcall).toBe(0);
    expect(evalsha).toBeGreaterThan(0);
    client.disconnect();
    admin.disconnect();
    await cluster.destroy();
  });

  redisStoreContract(
    'RedisStore (cluster, scripts)',
    'scconf:',
    () => client,
    () => admin,
  );
});
