/**
 * Operations by key on RedisStore, beyond the conformance suite (issue 16, item 4): on a
 * Cluster with a `hashTag`, an operation reaches the Redis key (and so the slot) the
 * requests use; one call per operation; the instance's deny cache forgets a key an
 * operation changed; a block holds on the local fallback while Redis is away, and an
 * operation with Redis away rejects instead of being answered by the failure policy; a
 * value that is not an entry of ours reads as absent and is overwritten.
 */
import { createLimiter, ManualClock, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotOf } from '../../packages/redis/src/keys.js';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';

const START = Date.UTC(2026, 0, 1);
let n = 0;

describe('Cluster, with a hashTag', () => {
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

  it("an operation on a tenant's user reaches the key its requests use, in the tenant's slot", async () => {
    const clock = new ManualClock(START);
    const seen: string[] = [];
    const store = new RedisStore({
      client,
      prefix: `kc${++n}:`,
      clock,
      timeoutMs: 5000,
      hashTag: (_rule, key) => {
        seen.push(key);
        return key.split(':')[0] as string;
      },
    });
    const rules: Rule<{ u: string }>[] = [{ name: 'user', key: (r) => r.u, limit: 3, window: '1m' }];
    const l = createLimiter({ rules, store, clock, prefix: 'kc' });
    await l.consume({ u: 'acme:alice' });
    const s = await l.penalize('user', 'acme:alice', 1);
    expect(s.remaining).toBe(1);
    // The function saw the key as given, for the request and for the operation.
    expect(seen).toEqual(['acme:alice', 'acme:alice']);
    const redisKey = store.keyOf(l.rules[0]?.spec as never, 'acme:alice', 'acme:alice');
    expect(slotOf(redisKey)).toBe(slotOf('{acme}'));
    expect(await client.pttl(redisKey)).toBeGreaterThan(0);
    await l.block('user', 'acme:alice', '1m');
    expect((await l.consume({ u: 'acme:alice' })).rules[0]?.reason).toBe('blocked');
    expect((await l.consume({ u: 'acme:bob' })).allowed).toBe(true);
    // Unsanitised keys too: the tag is taken from the raw key, the key itself hashed.
    await l.block('user', 'acme:ünïcödé user', '1m');
    expect((await l.consume({ u: 'acme:ünïcödé user' })).rules[0]?.reason).toBe('blocked');
    await store.close();
  });
});

describe('standalone', () => {
  let server: RedisServer;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ port: server.port, host: '127.0.0.1' });
  });

  afterAll(async () => {
    client.disconnect();
    await server.destroy();
  });

  it('one call per operation (one FCALL, nothing else sent)', async () => {
    const clock = new ManualClock(START);
    const store = new RedisStore({ client, prefix: `ks${++n}:`, clock, timeoutMs: 5000 });
    const l = createLimiter({ rules: [{ name: 'r', limit: 5, window: '1m' }], store, clock });
    await l.get('r', 'warm');
    const before = await commandCalls(client);
    await l.get('r', 'a');
    await l.block('r', 'a', '1m');
    await l.unblock('r', 'a');
    await l.penalize('r', 'a', 2);
    await l.reward('r', 'a', 1);
    const after = await commandCalls(client);
    expect(after.fcall - before.fcall).toBe(5);
    expect(after.evalsha - before.evalsha).toBe(0);
    await store.close();
  });

  it("the instance's deny cache forgets a key an operation changed", async () => {
    const clock = new ManualClock(START);
    const store = new RedisStore({ client, prefix: `ks${++n}:`, clock, timeoutMs: 5000 });
    const l = createLimiter({ rules: [{ name: 'r', limit: 1, window: '1h' }], store, clock });
    await l.consume({ headers: {}, socket: { remoteAddress: '203.0.113.7' } });
    const req = { headers: {}, socket: { remoteAddress: '203.0.113.7' } };
    expect((await l.consume(req)).allowed).toBe(false);
    // Cached: answered locally until the hour is over, unless an operation changes the key.
    expect((await l.consume(req)).allowed).toBe(false);
    await l.reward('r', '203.0.113.7', 1);
    expect((await l.consume(req)).allowed).toBe(true);
    await store.close();
  });

  it('hostile values under the key read as absent and are overwritten by a write', async () => {
    const clock = new ManualClock(START);
    const prefix = `ks${++n}:`;
    const store = new RedisStore({ client, prefix, clock, timeoutMs: 5000 });
    const l = createLimiter({ rules: [{ name: 'r', limit: 5, window: '1m' }], store, clock });
    const spec = l.rules[0]?.spec as never;
    await client.hset(store.keyOf(spec, 'h'), 'x', '1');
    await client.set(store.keyOf(spec, 's'), 'not an entry');
    await client.set(store.keyOf(spec, 'nan'), Buffer.alloc(40, 0xff));
    for (const k of ['h', 's', 'nan']) {
      expect((await l.get('r', k)).exists).toBe(false);
      expect((await l.block('r', k, '1m')).blocked).toBe(true);
      expect((await l.consume({ headers: {}, socket: { remoteAddress: '1.1.1.1' } })).allowed).toBe(true);
    }
    await store.close();
  });

  it('with Redis away, an operation rejects (no policy answers it), and a block holds on the local fallback', async () => {
    const own = await startRedis();
    const c = new Redis({ port: own.port, host: '127.0.0.1', maxRetriesPerRequest: 0, enableOfflineQueue: false });
    await new Promise((resolve) => c.once('ready', resolve));
    const clock = new ManualClock(START);
    const store = new RedisStore({ client: c, prefix: `ks${++n}:`, clock, timeoutMs: 300, onStoreError: 'local' });
    store.on('error', () => {});
    const l = createLimiter({ rules: [{ name: 'ip', limit: 5, window: '1m' }], store, clock });
    const req = { headers: {}, socket: { remoteAddress: '198.51.100.9' } };
    await l.block('ip', '198.51.100.9', '10m');
    await own.stop();
    await expect(l.get('ip', '198.51.100.9')).rejects.toBeTruthy();
    const d = await l.consume(req);
    expect(d.degraded).toBe('local');
    expect(d.allowed).toBe(false);
    expect(d.rules[0]?.reason).toBe('blocked');
    c.disconnect();
    await store.close();
    await own.destroy();
  });
});

/** FCALL and EVALSHA calls so far (INFO commandstats). */
async function commandCalls(c: Redis): Promise<{ fcall: number; evalsha: number }> {
  const info = await c.info('commandstats');
  const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  return { fcall: calls('fcall'), evalsha: calls('evalsha') };
}
