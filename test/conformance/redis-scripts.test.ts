/**
 * RedisStore on its script fallback passes the store conformance suite unchanged, on a
 * standalone server and on a three-master Cluster: the client logs in as an ACL user that
 * may not use FUNCTION, so every call is EVALSHA (checked on the servers' command counts).
 * The function path runs the same suite on every client in redis.test.ts and
 * redis-cluster.test.ts. Here the suite runs on ioredis only: the script is the function's
 * source and a client only carries its calls, and each client's script path is covered by
 * packages/redis/test/equivalence.test.ts (random programs against MemoryStore on both paths,
 * standalone and Cluster) and functions.test.ts (the switch to EVALSHA, NOSCRIPT reloads).
 */
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { CLIENTS, type Connected } from '../setup/clients.js';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';
import { addScriptsUser, loginFor, scriptCalls } from '../setup/redis-paths.js';
import { redisStoreContract } from './redis-contract.js';

const IOREDIS = CLIENTS.filter((k) => k.name === 'ioredis');

const tag = (name: string) => name.replace(/\W/g, '');

/** FCALL and EVALSHA calls run so far on the servers at `ports`, added up. */
async function callsOn(ports: readonly number[]): Promise<{ fcall: number; evalsha: number }> {
  const sum = { fcall: 0, evalsha: 0 };
  for (const port of ports) {
    const admin = new Redis({ port, host: '127.0.0.1' });
    const calls = await scriptCalls(admin);
    admin.disconnect();
    sum.fcall += calls.fcall;
    sum.evalsha += calls.evalsha;
  }
  return sum;
}

/** Each client's own run took the script path: EVALSHA calls, and not one FCALL. */
function expectScriptsOnly(ports: () => readonly number[]): void {
  let before: { fcall: number; evalsha: number };
  beforeAll(async () => {
    before = await callsOn(ports());
  });
  afterAll(async () => {
    const after = await callsOn(ports());
    expect(after.fcall - before.fcall).toBe(0);
    expect(after.evalsha - before.evalsha).toBeGreaterThan(0);
  });
}

describe('standalone', () => {
  let server: RedisServer;
  let admin: Redis;

  beforeAll(async () => {
    server = await startRedis();
    await addScriptsUser(server.port);
    admin = new Redis({ port: server.port, host: '127.0.0.1' });
  });

  afterAll(async () => {
    admin.disconnect();
    await server.destroy();
  });

  describe.each(IOREDIS)('$name', (kind) => {
    let c: Connected;
    expectScriptsOnly(() => [server.port]);
    beforeAll(async () => {
      c = await kind.standalone(server.port, loginFor('scripts'));
    });
    afterAll(() => c.close());
    redisStoreContract(
      `RedisStore (standalone, scripts, ${kind.name})`,
      `sconf:${tag(kind.name)}:`,
      () => c.client,
      () => admin,
    );
  });
});

describe('cluster', () => {
  let cluster: RedisCluster;
  let admin: Cluster;

  beforeAll(async () => {
    cluster = await startCluster();
    for (const n of cluster.nodes) await addScriptsUser(n.port);
    admin = new Cluster(cluster.startupNodes);
    await admin.ping();
  });

  afterAll(async () => {
    admin.disconnect();
    await cluster.destroy();
  });

  describe.each(IOREDIS)('$name', (kind) => {
    let c: Connected;
    expectScriptsOnly(() => cluster.nodes.map((n) => n.port));
    beforeAll(async () => {
      c = await kind.cluster(
        cluster.startupNodes.map((n) => n.port),
        loginFor('scripts'),
      );
    });
    afterAll(() => c.close());
    redisStoreContract(
      `RedisStore (cluster, scripts, ${kind.name})`,
      `scconf:${tag(kind.name)}:`,
      () => c.client,
      () => admin,
    );
  });
});
