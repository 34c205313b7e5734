/**
 * RedisStore on a three-master Redis Cluster passes the store conformance suite unchanged
 *, on every client it takes (ioredis, node-redis 5 and 6): stacks whose
 * keys span slots are decided per slot with refunds on rejection; no test leaves a key
 * without expiry on any master.
 */
import { STORE_LIBRARY_NAME } from '@tollgate/redis';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { portOf, type RedisPort } from '../../packages/redis/src/client.js';
import { CLIENTS, type Connected } from '../setup/clients.js';
import { type RedisCluster, startCluster } from '../setup/redis.js';
import { scriptCalls } from '../setup/redis-paths.js';
import { redisStoreContract } from './redis-contract.js';

let cluster: RedisCluster;
let admin: Cluster;

beforeAll(async () => {
  cluster = await startCluster();
  admin = new Cluster(cluster.startupNodes);
  await admin.ping();
});

afterAll(async () => {
  // The function path, with the library on every master (the fallback: redis-scripts.test.ts).
  for (const node of admin.nodes('master')) {
    expect(await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)).toHaveLength(1);
    expect((await scriptCalls(node)).evalsha).toBe(0);
  }
  admin.disconnect();
  await cluster.destroy();
});

describe.each(CLIENTS)('$name', (kind) => {
  let c: Connected;
  beforeAll(async () => {
    c = await kind.cluster(cluster.startupNodes.map((n) => n.port));
  });
  afterAll(() => c.close());
  it('the client port reaches every master (where a function library or script is loaded)', async () => {
    const port = portOf(c.client) as RedisPort;
    expect(port.cluster).toBe(true);
    const masters = await port.masters();
    expect(masters).toHaveLength(3);
    const ids = await Promise.all(masters.map((m) => m.command(['CLUSTER', 'MYID'])));
    expect(new Set(ids).size).toBe(3);
  });
  redisStoreContract(
    `RedisStore (cluster, ${kind.name})`,
    `cconf:${kind.name.replace(/\W/g, '')}:`,
    () => c.client,
    () => admin,
  );
});
