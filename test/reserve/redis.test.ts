/**
 * Reserve and settle on RedisStore: the shared cases and the bound's property
 * (reserve-contract.ts) on the suite's own redis-server (supplied time), batched and not,
 * and on a Cluster with the stack's keys in different slots; one atomic call per settle;
 * and a token bucket in deficit never reports a negative `remaining`.
 */
import { createLimiter, ManualClock, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';
import { reserveContract, START } from './reserve-contract.js';

describe('RedisStore', () => {
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

  reserveContract('RedisStore', (clock, prefix) => new RedisStore({ client, clock, prefix, timeoutMs: 5000 }), { runs: 25 });
  reserveContract(
    'RedisStore, batch: false',
    (clock, prefix) => new RedisStore({ client, clock, prefix: `nb${prefix}`, batch: false, timeoutMs: 5000 }),
    { runs: 10 },
  );

  it('a settle of a two-rule stack is one script call', async () => {
    const clock = new ManualClock(START);
    const store = new RedisStore({ client, clock, prefix: 'one:', timeoutMs: 5000 });
    const key = (q: { k: string }) => q.k;
    const l = createLimiter({
      rules: [
        { name: 'minute', key, algorithm: 'token-bucket', limit: 100, window: '1m' },
        { name: 'day', key, algorithm: 'fixed-window', limit: 1000, window: '1d' },
      ],
      store,
      clock,
      prefix: 'one',
    });
    const r = await l.reserve({ k: 'a' }, { cost: 10 });
    const before = await scriptCalls(client);
    await r.settle(30);
    // One FCALL (or EVALSHA) for the whole stack.
    expect((await scriptCalls(client)) - before).toBe(1);
    expect((await l.get('minute', 'a')).remaining).toBe(70);
    expect((await l.get('day', 'a')).remaining).toBe(970);
  });

  it('settles ride in the script run of the decisions asked with them: fewer calls, the same results as one call each', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
    // A tenant rule on one key for every request: the batch's hot key, settled and decided in one run.
    const rules: Rule<{ k: string }>[] = [
      { name: 'minute', key: (q) => q.k, algorithm: 'token-bucket', limit: 10, window: '1m' },
      { name: 'tenant', key: () => 'acme', algorithm: 'fixed-window', limit: 100, window: '1h' },
    ];
    async function run(batch: boolean, prefix: string) {
      const clock = new ManualClock(START);
      const store = new RedisStore({ client, clock, prefix: `${prefix}:`, batch, timeoutMs: 5000 });
      const l = createLimiter({ rules, store, clock, prefix });
      const rs = await Promise.all(keys.map((k) => l.reserve({ k }, { cost: 3 })));
      clock.advance(1000);
      const before = await scriptCalls(client);
      // Asked in one tick: a settle (below, at or above the estimate) and a decision per key.
      const settled = rs.map((r, i) => r.settle(i % 7));
      const decided = await Promise.all(keys.map((k) => l.consume({ k }, { cost: 2 })));
      await Promise.all(settled);
      const calls = (await scriptCalls(client)) - before;
      const state = await Promise.all([...keys.map((k) => l.get('minute', k)), l.get('tenant', 'acme')]);
      await store.close();
      return {
        calls,
        decided: decided.map((d) => ({ allowed: d.allowed, rules: d.rules.map((r) => [r.remaining, r.resetMs, r.retryAfterMs]) })),
        state: state.map((s) => [s.remaining, s.resetMs, s.retryAfterMs]),
      };
    }
    const batched = await run(true, 'rb');
    const alone = await run(false, 'ra');
    // A settle at the estimate (i % 7 === 3) changes nothing and calls nothing.
    const asked = keys.length + keys.filter((_, i) => i % 7 !== 3).length;
    expect(alone.calls).toBe(asked);
    // Asked in one tick, well under a batch's most ops: one script run for all.
    expect(batched.calls).toBe(1);
    expect(batched.decided).toEqual(alone.decided);
    expect(batched.state).toEqual(alone.state);
    // The settles applied: key k0 settled at 0 (its 3 back), k6 at 6 (3 more), each then consumed 2.
    expect(batched.state[0]?.[0]).toBe(8);
    expect(batched.state[6]?.[0]).toBe(2);
    console.log(
      `settles in the batch: ${batched.calls} script calls for ${asked - keys.length} settles and ${keys.length} decisions (one call each: ${alone.calls})`,
    );
  });

  it('a settle in a batch on Redis time is applied in its place among the decisions', async () => {
    const store = new RedisStore({ client, prefix: 'rt:', timeoutMs: 5000 });
    // A day's bucket: what it refills during the test is far below a unit.
    const l = createLimiter({
      rules: [
        { name: 'day', key: (q: { k: string }) => q.k, algorithm: 'token-bucket', limit: 1000, window: '1d' },
        { name: 'all', key: () => 'all', algorithm: 'token-bucket', limit: 1000, window: '1d' },
      ],
      store,
      prefix: 'rt',
    });
    const a = await l.reserve({ k: 'a' }, { cost: 10 });
    const b = await l.reserve({ k: 'b' }, { cost: 10 });
    const before = await scriptCalls(client);
    const settles = [a.settle(4), b.settle(25)];
    const ds = await Promise.all([l.consume({ k: 'a' }), l.consume({ k: 'b' })]);
    await Promise.all(settles);
    expect((await scriptCalls(client)) - before).toBe(1);
    // In the order asked: both settles (a: 6 back, b: 15 more on 'all'), then the decisions.
    expect(ds.map((d) => d.rules.map((r) => r.remaining))).toEqual([
      [995, 970],
      [974, 969],
    ]);
    await store.close();
  });

  it("another instance sees a reservation's debt: refused with the same exact retry time", async () => {
    const clock = new ManualClock(START);
    const rules: Rule<{ k: string }>[] = [{ name: 'tokens', key: (q) => q.k, algorithm: 'token-bucket', limit: 10, window: '1m' }];
    const a = createLimiter({ rules, store: new RedisStore({ client, clock, prefix: 'two:', timeoutMs: 5000 }), clock, prefix: 'two' });
    const b = createLimiter({ rules, store: new RedisStore({ client, clock, prefix: 'two:', timeoutMs: 5000 }), clock, prefix: 'two' });
    await (await a.reserve({ k: 'x' }, { cost: 2 })).settle(25);
    const refused = await b.consume({ k: 'x' });
    // 10 - 25 = -15 tokens: a request of 1 needs 16, at 6 s a token.
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs).toBe(96_000);
    clock.advance(96_000);
    expect((await b.consume({ k: 'x' })).allowed).toBe(true);
  });

  it('a token bucket in deficit through a group shared with countRejected reports remaining 0, not below', async () => {
    const clock = new ManualClock(START);
    const store = new RedisStore({ client, clock, prefix: 'def:', timeoutMs: 5000 });
    const base: Rule<{ k: string }> = { name: 'x', key: (q) => q.k, group: 'g', algorithm: 'token-bucket', limit: 2, window: '1m' };
    const counting = createLimiter({ rules: [{ ...base, name: 'counting', countRejected: true }], store, clock, prefix: 'def' });
    const plain = createLimiter({ rules: [{ ...base, name: 'plain' }], store, clock, prefix: 'def' });
    for (let i = 0; i < 6; i++) await counting.consume({ k: 'a' });
    const d = await plain.consume({ k: 'a' });
    expect(d.allowed).toBe(false);
    expect(d.rules[0]?.remaining).toBe(0);
    // The memory store says the same.
    expect((await plain.peek({ k: 'a' })).rules[0]?.remaining).toBe(0);
  });
});

/** Calls of FCALL, EVALSHA and EVAL so far, from INFO commandstats. */
async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  return n;
}

describe('RedisStore on a Cluster', () => {
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

  reserveContract('RedisStore on a Cluster', (clock, prefix) => new RedisStore({ client, clock, prefix, timeoutMs: 5000 }), { runs: 10 });
});

describe('RedisStore: a settle while Redis is away', () => {
  it('is reported, not thrown, and keeps the estimate; with the breaker open it settles on the local fallback', async () => {
    const server = await startRedis();
    const c = new Redis({
      port: server.port,
      host: '127.0.0.1',
      enableOfflineQueue: false,
      retryStrategy: () => 50,
      maxRetriesPerRequest: 1,
    });
    c.on('error', () => {});
    await new Promise((resolve) => c.once('ready', resolve));
    const store = new RedisStore({ client: c, prefix: 'away:', timeoutMs: 300, breaker: { failures: 1, cooldownMs: 60_000 } });
    const errors: { operation: string }[] = [];
    store.on('error', (e: { operation: string }) => errors.push(e));
    const l = createLimiter({
      rules: [{ name: 'tokens', key: (q: { k: string }) => q.k, algorithm: 'token-bucket', limit: 10, window: '1m' }],
      store,
      prefix: 'away',
    });
    try {
      const r = await l.reserve({ k: 'a' }, { cost: 4 });
      expect(r.allowed).toBe(true);
      await server.stop();
      await r.settle(25);
      expect(r.settled).toBe(true);
      expect(errors.map((e) => e.operation)).toEqual(['settle']);
      expect(store.breakerState).toBe('open');
      // Decided locally now: a reservation settled above its estimate leaves the local key in debt.
      const local = await l.reserve({ k: 'b' }, { cost: 2 });
      expect(local.decision.degraded).toBe('local');
      await local.settle(30);
      const after = await l.consume({ k: 'b' });
      expect(after).toMatchObject({ allowed: false, degraded: 'local' });
      expect(after.rules[0]?.remaining).toBe(0);
    } finally {
      c.disconnect();
      await server.destroy();
    }
  });
});
