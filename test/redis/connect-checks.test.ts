/**
 * What RedisStore checks when it connects (docs/distributed.md, "Settings that keep
 * counts"): a `maxmemory-policy` under which Redis evicts limiter keys, and a supplied
 * clock away from Redis `TIME`, each a coded process warning and a `tollgate:redis:warning`
 * message; a server that refuses `CONFIG` is checked quietly. Real redis-servers, each
 * started with the setting under test, standalone and Cluster, on every client the store
 * takes (ioredis, node-redis 5 and 6: the checks go through the client port).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { ManualClock } from '@tollgate/core';
import { RedisStore, type RedisWarningMessage } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, type Connected } from '../setup/clients.js';
import {
  type RedisCluster,
  type RedisServer,
  rawCommand,
  type SentinelSetup,
  startCluster,
  startRedis,
  startSentinel,
} from '../setup/redis.js';

const servers: Record<string, RedisServer> = {};
const clients: Redis[] = [];
/** Clients of the family under test, closed after all tests. */
const opened: Connected[] = [];
let cluster: RedisCluster;
let clustered: Cluster;

const warnings: { code: string | undefined; message: string }[] = [];
const messages: RedisWarningMessage[] = [];
const onWarning = (w: Error & { code?: string }) => {
  if (w.name === 'TollgateWarning') warnings.push({ code: w.code, message: w.message });
};
const onMessage = (m: unknown) => messages.push(m as RedisWarningMessage);

beforeAll(async () => {
  const started = await Promise.all([
    startRedis(['--maxmemory-policy', 'allkeys-lru']),
    startRedis(['--maxmemory-policy', 'volatile-lru']),
    startRedis(['--maxmemory-policy', 'noeviction']),
    startRedis(),
    startCluster(),
  ]);
  for (const [i, name] of ['allkeys', 'volatile', 'noeviction', 'noconfig'].entries()) servers[name] = started[i] as RedisServer;
  cluster = started[4] as RedisCluster;
  // As managed services do: the client's user may not run CONFIG.
  const admin = clientOf('noconfig');
  await admin.call('ACL', 'SETUSER', 'default', '-config');
  clustered = new Cluster(cluster.startupNodes);
  await clustered.ping();
  process.on('warning', onWarning);
  diagnosticsChannel.subscribe('tollgate:redis:warning', onMessage);
});

afterEach(() => {
  warnings.length = 0;
  messages.length = 0;
});

afterAll(async () => {
  process.off('warning', onWarning);
  diagnosticsChannel.unsubscribe('tollgate:redis:warning', onMessage);
  for (const c of clients) c.disconnect();
  for (const c of opened) await c.close();
  clustered.disconnect();
  await Promise.all([...Object.values(servers).map((s) => s.destroy()), cluster.destroy()]);
});

function clientOf(name: string): Redis {
  const c = new Redis({ port: (servers[name] as RedisServer).port, host: '127.0.0.1' });
  clients.push(c);
  return c;
}

/** Warnings are emitted on the next tick: let them arrive. */
const settle = () => new Promise((r) => setImmediate(r));

const portOfServer = (name: string) => (servers[name] as RedisServer).port;

describe.each(CLIENTS)('on $name', (kind) => {
  /** A connected client of the family under test on server `name`. */
  const on = async (name: string): Promise<object> => {
    const c = await kind.standalone(portOfServer(name));
    opened.push(c);
    return c.client;
  };

  describe('RedisStore: maxmemory-policy at connect', () => {
    for (const policy of ['allkeys', 'volatile'] as const) {
      it(`warns TOLLGATE_REDIS_EVICTION_POLICY for ${policy}-lru, which evicts limiter keys (bug: a second instance re-admitted an evicted exhausted key)`, async () => {
        const store = new RedisStore({ client: await on(policy) });
        await store.checked;
        await settle();
        expect(warnings.map((w) => w.code)).toEqual(['TOLLGATE_REDIS_EVICTION_POLICY']);
        expect(warnings[0]?.message).toContain(`${policy}-lru`);
        expect(messages).toEqual([expect.objectContaining({ store, code: 'TOLLGATE_REDIS_EVICTION_POLICY', policy: `${policy}-lru` })]);
        await store.close();
      });
    }

    it('says nothing for noeviction', async () => {
      const store = new RedisStore({ client: await on('noeviction') });
      await store.checked;
      await settle();
      expect(warnings).toEqual([]);
      expect(messages).toEqual([]);
      await store.close();
    });

    it('is quiet when CONFIG is refused (NOPERM, as managed services answer)', async () => {
      const client = await on('noconfig');
      const store = new RedisStore({ client });
      const errors: unknown[] = [];
      store.on('error', (e) => errors.push(e));
      await store.checked;
      await settle();
      expect(warnings).toEqual([]);
      expect(errors).toEqual([]);
      await store.close();
    });

    it('checks every master of a Cluster: quiet on the defaults, a warning when one master evicts', async () => {
      const ports = cluster.startupNodes.map((n) => n.port);
      const c = await kind.cluster(ports);
      opened.push(c);
      const quiet = new RedisStore({ client: c.client });
      await quiet.checked;
      await settle();
      expect(warnings).toEqual([]);
      await quiet.close();
      // Each master in turn: whichever one evicts is found.
      for (const one of clustered.nodes('master')) {
        await one.config('SET', 'maxmemory-policy', 'volatile-ttl');
        try {
          const store = new RedisStore({ client: c.client });
          await store.checked;
          await settle();
          expect(messages.map((m) => [m.code, m.policy])).toEqual([['TOLLGATE_REDIS_EVICTION_POLICY', 'volatile-ttl']]);
          await store.close();
        } finally {
          await one.config('SET', 'maxmemory-policy', 'noeviction');
        }
        messages.length = 0;
        warnings.length = 0;
      }
    });
  });

  describe('RedisStore: a supplied clock at connect', () => {
    it('warns TOLLGATE_REDIS_CLOCK_SKEW for a clock an hour ahead of Redis TIME (bug: it admitted 5 + 5 against 5/min beside Redis-time instances)', async () => {
      const store = new RedisStore({ client: await on('noeviction'), clock: new ManualClock(Date.now() + 3_600_000) });
      await store.checked;
      await settle();
      expect(warnings.map((w) => w.code)).toEqual(['TOLLGATE_REDIS_CLOCK_SKEW']);
      expect(messages).toHaveLength(1);
      expect(messages[0]?.skewMs).toBeGreaterThan(3_590_000);
      expect(messages[0]?.skewMs).toBeLessThan(3_610_000);
      await store.close();
    });

    it('says nothing for a clock within a second of Redis TIME, nor without a clock', async () => {
      const client = await on('noeviction');
      const near = new RedisStore({ client, clock: { now: () => Date.now() } });
      const redisTime = new RedisStore({ client });
      await Promise.all([near.checked, redisTime.checked]);
      await settle();
      expect(warnings).toEqual([]);
      await near.close();
      await redisTime.close();
    });
  });
});

describe('RedisStore: checks wait for a client the application connects later', () => {
  it('ioredis: waits for a lazyConnect client to be connected by the application', async () => {
    const lazy = new Redis({ port: portOfServer('allkeys'), host: '127.0.0.1', lazyConnect: true });
    clients.push(lazy);
    const store = new RedisStore({ client: lazy });
    await settle();
    expect(lazy.status).toBe('wait');
    await lazy.connect();
    await store.checked;
    await settle();
    expect(warnings.map((w) => w.code)).toEqual(['TOLLGATE_REDIS_EVICTION_POLICY']);
    await store.close();
  });

  it('ioredis: a Cluster client not connected yet is checked once it is ready', async () => {
    const [one] = clustered.nodes('master');
    await one?.config('SET', 'maxmemory-policy', 'volatile-ttl');
    try {
      const fresh = new Cluster(cluster.startupNodes);
      const store = new RedisStore({ client: fresh });
      await store.checked;
      await settle();
      expect(messages.map((m) => [m.code, m.policy])).toEqual([['TOLLGATE_REDIS_EVICTION_POLICY', 'volatile-ttl']]);
      await store.close();
      fresh.disconnect();
    } finally {
      await one?.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  for (const kind of CLIENTS.filter((k) => k.name !== 'ioredis'))
    it(`${kind.name}: a client made but not connected yet is checked once the application connects it`, async () => {
      const { createClient } = (kind.name === 'node-redis 5' ? await import('redis') : await import('redis6')) as typeof import('redis');
      const client = createClient({ socket: { host: '127.0.0.1', port: portOfServer('allkeys') } });
      client.on('error', () => {});
      const store = new RedisStore({ client });
      let settled = false;
      void store.checked.then(() => {
        settled = true;
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(settled).toBe(false);
      expect(warnings).toEqual([]);
      await client.connect();
      await store.checked;
      await settle();
      expect(warnings.map((w) => w.code)).toEqual(['TOLLGATE_REDIS_EVICTION_POLICY']);
      await store.close();
      client.destroy();
    });

  it('a store closed before its client connects settles `checked` and checks nothing', async () => {
    const lazy = new Redis({ port: portOfServer('allkeys'), host: '127.0.0.1', lazyConnect: true });
    clients.push(lazy);
    const store = new RedisStore({ client: lazy });
    await store.close();
    await store.checked;
    await lazy.connect();
    await settle();
    expect(warnings).toEqual([]);
  });
});

describe('RedisStore: checks through a Sentinel client', () => {
  let sentinel: SentinelSetup;
  beforeAll(async () => {
    sentinel = await startSentinel();
    // The master evicts (the replica keeps the default): a Sentinel client checks the master.
    expect(await rawCommand(sentinel.master.port, 'CONFIG SET maxmemory-policy allkeys-lfu')).toMatch(/^\+OK/);
  }, 60_000);
  afterAll(async () => {
    await sentinel?.destroy();
  });

  for (const kind of CLIENTS)
    it(`${kind.name}: warns for the master's evicting policy`, async () => {
      const c = await kind.sentinel(sentinel.name, sentinel.sentinelPorts);
      try {
        const store = new RedisStore({ client: c.client });
        await store.checked;
        await settle();
        expect(messages.map((m) => [m.code, m.policy])).toEqual([['TOLLGATE_REDIS_EVICTION_POLICY', 'allkeys-lfu']]);
        await store.close();
      } finally {
        await c.close();
      }
    });
});
