/**
 * The Redis commands a decision runs inside the store's function (Redis counts them in
 * INFO commandstats), which is what Redis' CPU per decision is made of
 * (test/bench/redis-script.callgrind.mjs): a one-rule decision alone in its call reads its
 * key with GET (cheaper for Redis than MGET) and writes it with one command; a stack reads
 * all its keys with one MGET. A write that starts a window expires at the window's end
 * itself (SET ... PXAT), not at a TTL from the moment of the write; an admitted entry whose
 * expiry is unchanged is written over the one read (SETRANGE key 0, its TTL kept).
 */
import { createLimiter, ManualClock } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';

let server: RedisServer;
let client: Redis;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(client, 'cmd:*')).toEqual([]);
  client.disconnect();
  await server.destroy();
});

/** Calls per command since the last CONFIG RESETSTAT, by lower-case command name. */
async function commandCalls(): Promise<Record<string, number>> {
  const text = await client.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

const N = 20;

describe('the commands of a decision', () => {
  it('one rule, one decision per call: FCALL, TIME, GET and one write (SET or SETRANGE) each, no MGET', async () => {
    const store = new RedisStore({ client, prefix: 'cmd:', timeoutMs: 5_000, denyCache: false });
    const l = createLimiter({ rules: [{ name: 'ip', key: (r: { ip: string }) => r.ip, limit: 1000, window: '1m' }], store, prefix: 'one' });
    await l.consume({ ip: 'warm' });
    // The store's connect-time checks (its own commands) are over before counting.
    await store.checked;
    await client.config('RESETSTAT');
    for (let i = 0; i < N; i++) expect((await l.consume({ ip: `10.0.0.${i % 5}` })).allowed).toBe(true);
    const calls = await commandCalls();
    expect(calls.fcall).toBe(N);
    expect(calls.time).toBe(N);
    expect(calls.get).toBe(N);
    expect((calls.set ?? 0) + (calls.setrange ?? 0)).toBe(N);
    // The five keys' later writes in their window keep its TTL.
    expect(calls.setrange).toBeGreaterThanOrEqual(N - 10);
    expect(calls.mget).toBeUndefined();
  });

  it('a three-rule stack, one decision per call: one MGET for its keys, one write per key', async () => {
    const store = new RedisStore({ client, prefix: 'cmd:', timeoutMs: 5_000, denyCache: false });
    const l = createLimiter({
      rules: [
        { name: 'ip', key: (r: { ip: string }) => r.ip, limit: 1000, window: '1m' },
        { name: 'tenant', key: () => 'tenant', limit: 1000, window: '1m' },
        { name: 'global', key: () => 'all', algorithm: 'token-bucket', limit: 1000, window: '1s' },
      ],
      store,
      prefix: 'three',
    });
    await l.consume({ ip: 'warm' });
    // The store's connect-time checks (its own commands) are over before counting.
    await store.checked;
    await client.config('RESETSTAT');
    for (let i = 0; i < N; i++) expect((await l.consume({ ip: `10.0.1.${i % 5}` })).allowed).toBe(true);
    const calls = await commandCalls();
    expect(calls.fcall).toBe(N);
    expect(calls.mget).toBe(N);
    expect(calls.get).toBeUndefined();
    expect((calls.set ?? 0) + (calls.setrange ?? 0)).toBe(3 * N);
  });

  it('a tiered decision (base rule, route rule, the tier with an async limit) is one call, a refusal too', async () => {
    // Issue 16: tiers and values per request join the base and route rules in one decision,
    // one round trip; a refusal by the tier rule needs no refund call (all or nothing inside).
    const store = new RedisStore({ client, prefix: 'cmd:', timeoutMs: 5_000, denyCache: false });
    type Req = { ip: string; plan: string; quota: number };
    const l = createLimiter<Req>({
      rules: [{ name: 'ip', key: (r) => r.ip, limit: 1000, window: '1m' }],
      tiers: {
        free: [{ name: 'free', key: (r) => r.ip, limit: 2, window: '1m', algorithm: 'fixed-window' }],
        pro: [{ name: 'pro', key: (r) => r.ip, limit: async (r) => r.quota, window: '1m', algorithm: 'token-bucket' }],
      },
      tier: async (r) => r.plan,
      store,
      // A still clock: on Redis time a minute ending among the decisions gave free a fresh window.
      clock: new ManualClock(Date.now()),
      prefix: 'tiers',
    }).extend([{ name: 'route', key: () => 'upload', limit: 1000, window: '1m' }]);
    await l.consume({ ip: 'warm', plan: 'pro', quota: 10 });
    await store.checked;
    await client.config('RESETSTAT');
    const allowed: boolean[] = [];
    for (let i = 0; i < N; i++)
      allowed.push((await l.consume({ ip: '10.0.2.1', plan: i < N / 2 ? 'pro' : 'free', quota: 50 + i })).allowed);
    // Pro admits its ten; free (limit 2, a separate rule and count) admits two, then refuses.
    expect(allowed).toEqual([...Array(N / 2 + 2).fill(true), ...Array(N / 2 - 2).fill(false)]);
    const calls = await commandCalls();
    expect(calls.fcall).toBe(N);
    expect(calls.mget).toBe(N);
    expect(calls.evalsha).toBeUndefined();
    expect(calls.eval).toBeUndefined();
  });

  it("a key of another type is read as absent by a one-rule call's GET and overwritten", async () => {
    const store = new RedisStore({ client, prefix: 'cmd:', timeoutMs: 5_000, denyCache: false });
    const l = createLimiter({
      rules: [{ name: 'ip', key: (r: { ip: string }) => r.ip, algorithm: 'fixed-window', limit: 2, window: '1m' }],
      store,
      // A still clock: on Redis time a minute boundary between the consumes opened a fresh window.
      clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
      prefix: 'typed',
    });
    const [op] = l.resolve({ ip: 'h' });
    if (op === undefined) throw new Error('no op');
    const key = store.keyOf(op.rule, op.key);
    await client.hset(key, 'field', 'value');
    const d = await l.consume({ ip: 'h' });
    expect(d.allowed).toBe(true);
    expect(d.rules[0]?.remaining).toBe(1);
    expect(await client.type(key)).toBe('string');
    expect((await l.consume({ ip: 'h' })).rules[0]?.remaining).toBe(0);
    expect((await l.consume({ ip: 'h' })).allowed).toBe(false);
  });

  it("a write that starts a fixed window expires at the window's end instant (PXAT), shared by the window's keys", async () => {
    const W = 60_000;
    const store = new RedisStore({ client, prefix: 'cmd:', timeoutMs: 5_000, denyCache: false });
    const l = createLimiter({
      rules: [{ name: 'ip', key: (r: { ip: string }) => r.ip, algorithm: 'fixed-window', limit: 1000, window: W }],
      store,
      prefix: 'at',
    });
    const ips = ['a', 'b', 'c'];
    for (const ip of ips) await l.consume({ ip });
    const [t] = await client.time();
    const expiries = await Promise.all(
      ips.map((ip) => {
        const [op] = l.resolve({ ip });
        if (op === undefined) throw new Error('no op');
        return client.call('PEXPIRETIME', store.keyOf(op.rule, op.key)) as Promise<number>;
      }),
    );
    const nowMs = Number(t) * 1000;
    // The same instant for all three unless a window ended between the writes.
    for (const x of expiries) {
      expect(x % W).toBe(0);
      expect(x).toBeGreaterThan(nowMs - 1000);
      expect(x).toBeLessThanOrEqual(nowMs + W + 1000);
    }
  });
});
