/**
 * Leases (`RedisStore({ lease })`) against a real Redis: the option's validation, leased
 * decisions and their figures, stacks all-or-nothing, give-backs (expiry, close, operations
 * by key), refusals answered locally, features under leases (costs, blockFor, countRejected,
 * update, reserve/settle), the failure policy when a lease runs out, and the calls a
 * decision costs. Several stores on one Redis stand for instances; the separate-process
 * check is test/reliability/lease-instances.test.ts.
 */
import { type AlgorithmName, createLimiter, type Limiter, ManualClock, type Rule, type RuleSpec, TollgateError } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DelayProxy } from '../../../test/reliability/helpers/delay-proxy.js';
import { keysWithoutExpiry, type RedisServer, startCluster, startRedis } from '../../../test/setup/redis.js';
import { storeCallsOn } from '../../../test/setup/redis-paths.js';

let server: RedisServer;
let client: Redis;
let admin: Redis;
let n = 0;
const SLOW = 10_000;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1' });
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(admin, 'lease*')).toEqual([]);
  client.disconnect();
  admin.disconnect();
  await server.destroy();
});

function prefix(): string {
  return `lease${++n}:`;
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TollgateError);
    return (err as TollgateError).code;
  }
  return undefined;
}

describe('options', () => {
  it('validates lease at construction and ttl against each rule window at its first decision', async () => {
    expect(codeOf(() => new RedisStore({ client, lease: 5 as never }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, lease: { max: 0 } }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, lease: { max: 1.5 } }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, lease: { ttl: 'soon' as never } }))).toBe('TG_INVALID_DURATION');
    expect(codeOf(() => new RedisStore({ client, lease: { size: 3 } as never }))).toBe('TG_UNKNOWN_OPTION');
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'fast', limit: 10, window: '5s' }], store });
    const err = await limiter.consume({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TollgateError);
    expect((err as TollgateError).code).toBe('TG_INVALID_OPTION');
    expect((err as TollgateError).path).toBe('RedisStore.lease.ttl');
    // A window of ten ttls is enough.
    const ok = createLimiter({ rules: [{ name: 'ok', limit: 10, window: '10s' }], store });
    expect((await ok.consume({})).allowed).toBe(true);
    await store.close();
  });
});

/** An ioredis client through a delay proxy to the suite's server; `end` disconnects both. */
async function proxied(): Promise<{ proxy: DelayProxy; client: Redis; end: () => Promise<void> }> {
  const proxy = new DelayProxy(server.port);
  const port = await proxy.listen();
  const client = new Redis({ port, host: '127.0.0.1' });
  await new Promise((r) => client.once('ready', r));
  return {
    proxy,
    client,
    end: async () => {
      client.disconnect();
      await proxy.close();
    },
  };
}

const ALGORITHMS: AlgorithmName[] = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket', 'sliding-buckets'];

describe('leased decisions (one instance, supplied clock)', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: admits exactly the limit, mostly without Redis, and gives unused units back on close`, async () => {
      const clock = new ManualClock(1_000_000);
      const p = prefix();
      const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
      const limiter = createLimiter({ rules: [{ name: 'r', algorithm, limit: 100, window: '1m', key: () => 'k' }], store, clock });
      const before = await storeCallsOn(admin);
      let admitted = 0;
      let last = 101;
      for (let i = 0; i < 150; i++) {
        const d = await limiter.consume({});
        if (d.allowed) {
          admitted++;
          // remaining never grows while nothing is given back, and never over-promises.
          const r = d.rules[0]?.remaining as number;
          expect(r).toBeLessThanOrEqual(100 - admitted);
          expect(r).toBeLessThanOrEqual(last);
          last = r;
        }
      }
      expect(admitted).toBe(100);
      const calls = (await storeCallsOn(admin)) - before;
      // 100 admissions in leases of at most 10 (and halving near the limit), 50 refusals
      // answered by the deny cache after the first.
      expect(calls).toBeLessThan(40);
      await store.close();
      expect(store.leased(limiter.rules[0]?.spec as RuleSpec, 'k')).toBe(0);
    });
  }

  it('gives unused units back when the lease expires, at the lease time (a sliding log frees them)', async () => {
    const clock = new ManualClock(2_000_000);
    const p = prefix();
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 100, window: '1m', key: () => 'k' }];
    const leased = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact, clock });
    // Exact (first sight of the key), then a lease of 2, then one of 4 (twice what the last used).
    for (let i = 0; i < 4; i++) await leased.consume({});
    expect(store.leased(leased.rules[0]?.spec as RuleSpec, 'k')).toBe(3);
    expect((await plain.get('r', 'k')).remaining).toBe(100 - 4 - 3);
    clock.advance(1000);
    // The next decision finds the lease expired: its 3 units go back, and it leases anew.
    await leased.consume({});
    await new Promise((r) => setTimeout(r, 50));
    const rem = (await plain.get('r', 'k')).remaining;
    expect(rem + store.leased(leased.rules[0]?.spec as RuleSpec, 'k')).toBe(100 - 5);
    await store.close();
    expect((await plain.get('r', 'k')).remaining).toBe(95);
    await exact.close();
  });
});

describe('close', () => {
  it('close while a lease call is in flight gives that lease back too (it was left held, and swept into a closed store)', async () => {
    const clock = new ManualClock(2_500_000);
    const p = prefix();
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 100, window: '1m', key: () => 'k' }];
    const leased = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact, clock });
    // Exact, then a lease of 2 used up: the fourth decision leases 4 in a call of its own.
    for (let i = 0; i < 3; i++) await leased.consume({});
    const inFlight = leased.consume({});
    // In the same tick: the lease call has been sent, Redis has not answered.
    await store.close();
    expect((await inFlight).allowed).toBe(true);
    expect(store.leased(leased.rules[0]?.spec as RuleSpec, 'k')).toBe(0);
    expect((await plain.get('r', 'k')).remaining).toBe(100 - 4);
    await exact.close();
  });
});

describe('instances sharing a key', () => {
  it('four stores never admit more than the limit, and together admit exactly it', async () => {
    const clock = new ManualClock(3_000_000);
    const p = prefix();
    const stores = [0, 1, 2, 3].map(
      () => new RedisStore({ client, prefix: p, timeoutMs: SLOW, instances: 4, lease: { max: 20, ttl: '1s' } }),
    );
    const limiters = stores.map((store) =>
      createLimiter({ rules: [{ name: 'r', limit: 200, window: '1m', key: () => 'k' }], store, clock }),
    );
    let admitted = 0;
    for (let i = 0; i < 400; i++) {
      const d = await (limiters[i % 4] as (typeof limiters)[number]).consume({});
      if (d.allowed) admitted++;
    }
    // Units held by one instance are refused to the others until they go back.
    expect(admitted).toBeLessThanOrEqual(200);
    clock.advance(1000);
    for (let i = 0; i < 400; i++) {
      const d = await (limiters[i % 4] as (typeof limiters)[number]).consume({});
      if (d.allowed) admitted++;
    }
    expect(admitted).toBe(200);
    for (const s of stores) await s.close();
  });
});

describe('stacks', () => {
  it('a stack leases for every rule; a refusal by one rule takes nothing from the others', async () => {
    const clock = new ManualClock(4_000_000);
    const p = prefix();
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<{ u: string }>[] = [
      { name: 'wide', limit: 1000, window: '1m', key: () => 'g' },
      { name: 'narrow', limit: 5, window: '1m', key: (r: { u: string }) => r.u },
    ];
    const leased = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact, clock });
    let a = 0;
    for (let i = 0; i < 8; i++) if ((await leased.consume({ u: 'x' })).allowed) a++;
    expect(a).toBe(5);
    // 'wide' counted 5 admissions plus what this instance holds, nothing for the refusals.
    const wide = (await plain.get('wide', 'g')).remaining;
    expect(wide + store.leased(leased.rules[0]?.spec as RuleSpec, 'g')).toBe(1000 - 5);
    await store.close();
    expect((await plain.get('wide', 'g')).remaining).toBe(995);
    await exact.close();
  });
});

describe('refusals and features under leases', () => {
  it('a refused key is answered locally until its retry time (no Redis call)', async () => {
    const clock = new ManualClock(5_000_000);
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 3, window: '1m' }], store, clock });
    for (let i = 0; i < 4; i++) await limiter.consume({});
    const before = await storeCallsOn(admin);
    for (let i = 0; i < 20; i++) expect((await limiter.consume({})).allowed).toBe(false);
    expect((await storeCallsOn(admin)) - before).toBe(0);
    await store.close();
  });

  it('blockFor and countRejected decide as without leases', async () => {
    const clock = new ManualClock(6_000_000);
    const p = prefix();
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const plainStore = new RedisStore({ client, prefix: `${p}x`, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [
      { name: 'b', limit: 20, window: '1m', blockFor: '1h' },
      { name: 'c', limit: 20, window: '1m', countRejected: true },
    ];
    for (const rule of rules) {
      const leased = createLimiter({ rules: [rule], store, clock });
      const plain = createLimiter({ rules: [rule], store: plainStore, clock });
      const a: boolean[] = [];
      const b: boolean[] = [];
      for (let i = 0; i < 30; i++) {
        a.push((await leased.consume({}, { cost: 1 + (i % 3) })).allowed);
        b.push((await plain.consume({}, { cost: 1 + (i % 3) })).allowed);
        clock.advance(100);
      }
      expect(a).toEqual(b);
    }
    await store.close();
    await plainStore.close();
  });

  it('update drops the lease; a reset on this instance drops it; a block gives it back first', async () => {
    const clock = new ManualClock(7_000_000);
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 100, window: '1m', key: () => 'k' }], store, clock });
    const spec = () => limiter.rules[0]?.spec as RuleSpec;
    for (let i = 0; i < 4; i++) await limiter.consume({});
    expect(store.leased(spec(), 'k')).toBe(3);
    limiter.update('r', { limit: 50 });
    const d = await limiter.consume({});
    expect(d.allowed).toBe(true);
    // The new rule's lease: 100 - 3 - 9 (the old lease, given back) ... at most 10.
    await limiter.reset('r', 'k');
    expect(store.leased(spec(), 'k')).toBe(0);
    expect((await limiter.get('r', 'k')).remaining).toBe(50);
    await limiter.consume({});
    await limiter.consume({});
    expect(store.leased(spec(), 'k')).toBeGreaterThan(0);
    await limiter.block('r', 'k', '1m');
    expect(store.leased(spec(), 'k')).toBe(0);
    expect((await limiter.consume({})).allowed).toBe(false);
    await store.close();
  });

  it("get on this instance counts no unit it holds as used (it reported Redis' remaining, the held units missing)", async () => {
    const clock = new ManualClock(7_500_000);
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: 'sliding-log', limit: 100, window: '1m', key: () => 'k' }],
      store,
      clock,
    });
    for (let i = 0; i < 4; i++) await limiter.consume({});
    expect(store.leased(limiter.rules[0]?.spec as RuleSpec, 'k')).toBe(3);
    const state = await limiter.get('r', 'k');
    expect(state.remaining).toBe(100 - 4);
    expect((await limiter.peek({})).rules[0]?.remaining).toBe(100 - 4 - 1);
    await store.close();
  });

  for (const op of ['block', 'penalize', 'reset'] as const) {
    it(`${op} while a lease call for the key is in flight ends that lease too (it was kept, and admitted past the ${op})`, async () => {
      const clock = new ManualClock(7_700_000);
      const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
      const limiter = createLimiter({
        rules: [{ name: 'r', algorithm: 'sliding-log', limit: 20, window: '1m', key: () => 'k' }],
        store,
        clock,
      });
      for (let i = 0; i < 3; i++) await limiter.consume({});
      // In the same tick: the fourth decision's lease call has been sent, Redis has not answered.
      const inFlight = limiter.consume({});
      const done =
        op === 'block' ? limiter.block('r', 'k', '1h') : op === 'penalize' ? limiter.penalize('r', 'k', 20) : limiter.reset('r', 'k');
      expect((await inFlight).allowed).toBe(true);
      await done;
      let admitted = 0;
      for (let i = 0; i < 30; i++) if ((await limiter.consume({})).allowed) admitted++;
      expect(admitted).toBe(op === 'reset' ? 20 : 0);
      await store.close();
    });
  }

  it('a reset while refused stacks hold units of the key lease drops those units too (they went back into the fresh state)', async () => {
    // Instance A (through a delaying proxy) and B share the global rule G.
    const { proxy, client: c, end } = await proxied();
    const clock = new ManualClock(7_900_000);
    const p = prefix();
    type Req = { id: string };
    const G: Rule<Req> = { name: 'G', algorithm: 'fixed-window', limit: 100, window: '1h', key: () => 'g' };
    const U: Rule<Req> = { name: 'U', limit: 1000, window: '1h', key: (r) => r.id };
    const storeA = new RedisStore({ client: c, prefix: p, timeoutMs: SLOW, denyCache: false, lease: { max: 20, ttl: '1m' } });
    const storeB = new RedisStore({ client, prefix: p, timeoutMs: SLOW, denyCache: false });
    const a = createLimiter({ rules: [G, U], store: storeA, clock });
    const b = createLimiter({ rules: [G], store: storeB, clock });
    try {
      const g = a.rules[0]?.spec as RuleSpec;
      for (let i = 0; i < 40 && storeA.leased(g, 'g') < 5; i++) await a.consume({ id: 'w' });
      expect(storeA.leased(g, 'g')).toBeGreaterThanOrEqual(5);
      await a.block('U', 'blocked', '1h');
      proxy.delayMs = 400;
      // Five stacks each take a unit of G's lease, and wait for Redis to refuse U; meanwhile G is reset.
      const refused = Array.from({ length: 5 }, () => a.consume({ id: 'blocked' }));
      const reset = a.reset('G', 'g');
      // After the reset reached Redis, before the refusals reach A: B counts 3 in the fresh state.
      await new Promise((r) => setTimeout(r, 600));
      for (let i = 0; i < 3; i++) expect((await b.consume({ id: 'x' })).allowed).toBe(true);
      expect((await Promise.all(refused)).map((d) => d.allowed)).toEqual([false, false, false, false, false]);
      await reset;
      proxy.delayMs = 0;
      // Through A's connection, after anything A sent when the refusals arrived.
      await a.peek({ id: 'w' });
      let admitted = 3;
      while (admitted < 200 && (await b.consume({ id: 'x' })).allowed) admitted++;
      expect(admitted).toBe(100);
    } finally {
      await storeA.close();
      await storeB.close();
      await end();
    }
  });

  it('reserve and settle: settle goes to Redis, at the lease time', async () => {
    const clock = new ManualClock(8_000_000);
    const p = prefix();
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 50, ttl: '1s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1m', key: () => 'k' }];
    const limiter = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact, clock });
    await limiter.consume({});
    // The lease call itself reserves (counted at the lease time)...
    const res = await limiter.reserve({}, { cost: 10 });
    expect(res.allowed).toBe(true);
    await res.settle(4);
    clock.advance(5);
    // ... and a reservation from the lease it took: its give-back returns to the lease.
    const res2 = await limiter.reserve({}, { cost: 10 });
    expect(res2.allowed).toBe(true);
    await res2.settle(3);
    // Above the estimate: the extra is charged in Redis.
    const res3 = await limiter.reserve({}, { cost: 2 });
    await res3.settle(5);
    const held = store.leased(limiter.rules[0]?.spec as RuleSpec, 'k');
    expect((await plain.get('r', 'k')).remaining + held).toBe(1000 - 1 - 4 - 3 - 5);
    await store.close();
    expect((await plain.get('r', 'k')).remaining).toBe(1000 - 1 - 4 - 3 - 5);
    await exact.close();
  });
});

describe('failure policy', () => {
  it('decides from a held lease while Redis is gone; the policy answers when it runs out', async () => {
    const own = await startRedis();
    const c = new Redis({ port: own.port, host: '127.0.0.1', maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: false });
    await new Promise((r) => c.once('ready', r));
    const store = new RedisStore({ client: c, prefix: prefix(), timeoutMs: 200, onStoreError: 'deny', lease: { max: 20, ttl: '5s' } });
    // sliding-log: a lease lasts its ttl (a window's count would end with its window, on Redis
    // time wherever a minute ends, leaving less held than taken).
    const limiter = createLimiter({ rules: [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1m', key: () => 'k' }], store });
    for (let i = 0; i < 30 && store.leased(limiter.rules[0]?.spec as RuleSpec, 'k') < 5; i++) await limiter.consume({});
    const held = store.leased(limiter.rules[0]?.spec as RuleSpec, 'k');
    expect(held).toBeGreaterThanOrEqual(5);
    await own.destroy();
    for (let i = 0; i < held; i++) {
      const d = await limiter.consume({});
      expect(d.allowed).toBe(true);
      expect(d.degraded).toBeUndefined();
    }
    const after = await limiter.consume({});
    expect(after.degraded).toBe('deny');
    expect(after.allowed).toBe(false);
    c.disconnect();
    await store.close().catch(() => {});
  });
  it("with 'local', a lease's units going back while the breaker is open stay counted in Redis: the local fallback is not credited with them", async () => {
    const own = await startRedis();
    const c = new Redis({ port: own.port, host: '127.0.0.1', maxRetriesPerRequest: 0, enableOfflineQueue: false });
    c.on('error', () => {});
    await new Promise((r) => c.once('ready', r));
    // The start of a minute: every decision below falls in one fixed window.
    const clock = new ManualClock(60_000 * 200_000);
    const store = new RedisStore({
      client: c,
      prefix: prefix(),
      timeoutMs: 200,
      onStoreError: 'local',
      breaker: { failures: 1, cooldownMs: 3000 },
      // The local fallback's share of each limit: a tenth.
      instances: 10,
      clock,
      lease: { max: 10, ttl: '1s' },
    });
    const limiter = createLimiter({
      rules: [{ name: 'r', algorithm: 'fixed-window', limit: 100, window: '1m', key: () => 'k' }],
      store,
      clock,
    });
    const probe = createLimiter({ rules: [{ name: 'p', limit: 1000, window: '1m', key: () => 'p' }], store, clock });
    const spec = limiter.rules[0]?.spec as RuleSpec;
    let local = 0;
    const take = async () => {
      const d = await limiter.consume({});
      if (d.allowed && d.degraded === 'local') local++;
      return d;
    };
    try {
      // Redis away: the local fallback admits its share of the key (10 of 100).
      await own.stop();
      for (let i = 0; i < 12; i++) await take();
      expect(local).toBe(10);
      // Redis back (empty): once the breaker lets calls through, this instance leases the key.
      await own.start();
      for (let i = 0; i < 600 && (await probe.consume({})).degraded !== undefined; i++) await new Promise((r) => setTimeout(r, 50));
      for (let i = 0; i < 30 && store.leased(spec, 'k') < 3; i++) expect((await take()).degraded).toBeUndefined();
      expect(store.leased(spec, 'k')).toBeGreaterThanOrEqual(3);
      // Redis away again, the breaker open; the lease expires and its units go back.
      await own.stop();
      expect((await probe.consume({})).degraded).toBe('local');
      clock.advance(1000);
      for (let i = 0; i < 10; i++) await take();
      // The local fallback admitted its share once: the lease's units were never counted there.
      expect(local).toBe(10);
    } finally {
      await store.close().catch(() => {});
      c.disconnect();
      await own.destroy();
    }
  }, 60_000);
});

describe('failure policy: give-backs', () => {
  it("a lease given back while the breaker is open stays counted in Redis (it credited the 'local' fallback, which never counted it)", async () => {
    const { proxy, client: c, end } = await proxied();
    // Inside one clock-aligned hour, so both stores' fixed windows stay the same.
    const clock = new ManualClock(3_600_000 * 500 + 1000);
    const breaker = { failures: 1, cooldownMs: 3_600_000 };
    // One late answer opens the breaker for good: a deadline no busy machine's call reaches
    // (100 ms did, and nothing was leased), and a proxy delay far past it.
    const store = new RedisStore({ client: c, prefix: prefix(), timeoutMs: 1000, breaker, lease: { max: 10, ttl: '1m' } });
    const a: Rule<unknown> = { name: 'a', algorithm: 'fixed-window', limit: 20, window: '1h', key: () => 'k' };
    const leased = createLimiter({ rules: [a], store, clock });
    // A stack with a dry-run rule is never leased: it decides rule a exactly (here: locally).
    const exact = createLimiter({ rules: [a, { name: 'shadow', limit: 1000, window: '1h', key: () => 'k', dryRun: true }], store, clock });
    try {
      for (let i = 0; i < 10 && store.leased(leased.rules[0]?.spec as RuleSpec, 'k') < 3; i++) await leased.consume({});
      const held = store.leased(leased.rules[0]?.spec as RuleSpec, 'k');
      expect(held).toBeGreaterThanOrEqual(3);
      // Redis too slow: the breaker opens and the local fallback decides rule a, up to its 20.
      proxy.delayMs = 5000;
      let local = 0;
      for (let i = 0; i < 25; i++) {
        const d = await exact.consume({});
        expect(d.degraded).toBe('local');
        if (d.allowed) local++;
      }
      expect(local).toBe(20);
      // The lease ends (its time is over): its units were counted in Redis, not in the fallback.
      clock.advance(60_000);
      const after = await leased.consume({});
      expect(after.degraded).toBe('local');
      expect(after.allowed).toBe(false);
    } finally {
      proxy.delayMs = 0;
      await store.close();
      await end();
    }
  });
});

describe('bad input to a store with leases', () => {
  it('refund and settle reject, as without leases, on a time that is not one or a hashTag that throws (they threw synchronously, or took the units into the lease)', async () => {
    let throwing = false;
    const store = new RedisStore({
      client,
      prefix: prefix(),
      timeoutMs: SLOW,
      lease: { max: 10, ttl: '1s' },
      hashTag: (_rule, key) => {
        if (throwing) throw new Error('hashTag failed');
        return key;
      },
    });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 100, window: '1m', key: () => 'k' }], store });
    for (let i = 0; i < 3; i++) await limiter.consume({});
    const d = await limiter.consume({});
    const spec = limiter.rules[0]?.spec as RuleSpec;
    expect(store.leased(spec, 'k')).toBeGreaterThan(0);
    const ops = [{ rule: spec, key: 'k', cost: 1 }];
    // A promise that rejects: a caller's .catch sees the error (a synchronous throw escaped it).
    const outcome = (call: () => Promise<void>) =>
      Promise.resolve().then(() => {
        let p: Promise<void>;
        try {
          p = call();
        } catch (err) {
          return `threw ${(err as TollgateError).code ?? (err as Error).message}`;
        }
        return p.then(
          () => 'resolved',
          (err: unknown) => `rejected ${(err as TollgateError).code ?? (err as Error).message}`,
        );
      });
    expect(await outcome(() => store.refund(ops, d.at, Number.NaN))).toBe('rejected TG_INVALID_TIME');
    expect(await outcome(() => store.settle(ops, d.at, Number.NaN))).toBe('rejected TG_INVALID_TIME');
    // A decision time that is not one is not taken back into the live lease either.
    expect(await outcome(() => store.refund(ops, Number.NaN))).toBe('rejected TG_INVALID_TIME');
    expect(await outcome(() => store.settle([{ ...ops[0], cost: -1 } as (typeof ops)[0]], Number.NaN))).toBe('rejected TG_INVALID_TIME');
    throwing = true;
    expect(await outcome(() => store.refund(ops, d.at))).toBe('rejected hashTag failed');
    expect(await outcome(() => store.settle(ops, d.at))).toBe('rejected hashTag failed');
    throwing = false;
    await store.close();
  });
});

describe('peek and rules never leased', () => {
  it('a peek covered by the lease is answered locally; otherwise Redis answers with the held units added', async () => {
    const clock = new ManualClock(11_000_000);
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 100, window: '1m', key: () => 'k' }], store, clock });
    for (let i = 0; i < 4; i++) await limiter.consume({});
    expect(store.leased(limiter.rules[0]?.spec as RuleSpec, 'k')).toBe(3);
    const before = await storeCallsOn(admin);
    const p = await limiter.peek({});
    expect((await storeCallsOn(admin)) - before).toBe(0);
    // As an exact peek would say: 100 - 4 consumed, less the peeked request.
    expect(p.allowed).toBe(true);
    expect(p.rules[0]?.remaining).toBe(95);
    const big = await limiter.peek({}, { cost: 5 });
    expect((await storeCallsOn(admin)) - before).toBe(1);
    expect(big.allowed).toBe(true);
    expect(big.rules[0]?.remaining).toBe(91);
    await store.close();
  });

  it('a leaky-bucket queue and a dry-run rule decide exactly, every time', async () => {
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const queue = createLimiter({
      rules: [{ name: 'q', algorithm: 'leaky-bucket', mode: 'queue', limit: 100, window: '1m', key: () => 'k' }],
      store,
    });
    const dry = createLimiter({ rules: [{ name: 'd', limit: 100, window: '1m', dryRun: true, key: () => 'k' }], store });
    const before = await storeCallsOn(admin);
    for (let i = 0; i < 5; i++) {
      await queue.consume({});
      await dry.consume({});
    }
    expect((await storeCallsOn(admin)) - before).toBe(10);
    expect(store.leased(queue.rules[0]?.spec as RuleSpec, 'k') + store.leased(dry.rules[0]?.spec as RuleSpec, 'k')).toBe(0);
    await store.close();
  });
});

describe('slow Redis and clock steps', () => {
  it('decides from a held lease while Redis is slower than timeoutMs; the policy answers when it runs out', async () => {
    const { proxy, client: c, end } = await proxied();
    // A deadline a busy machine's lease calls meet, and a proxy delay far past it.
    const store = new RedisStore({ client: c, prefix: prefix(), timeoutMs: 400, onStoreError: 'deny', lease: { max: 20, ttl: '5s' } });
    // sliding-log: a lease lasts its ttl, not only to the end of a window's minute (see above).
    const limiter = createLimiter({ rules: [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1m', key: () => 'k' }], store });
    for (let i = 0; i < 30 && store.leased(limiter.rules[0]?.spec as RuleSpec, 'k') < 5; i++) await limiter.consume({});
    const held = store.leased(limiter.rules[0]?.spec as RuleSpec, 'k');
    expect(held).toBeGreaterThanOrEqual(5);
    proxy.delayMs = 2000;
    for (let i = 0; i < held; i++) {
      const d = await limiter.consume({});
      expect(d.allowed).toBe(true);
      expect(d.degraded).toBeUndefined();
    }
    const after = await limiter.consume({});
    expect(after.degraded).toBe('deny');
    proxy.delayMs = 0;
    await store.close();
    await end();
  });

  it("a lease call answered after its deadline keeps only the request's cost counted: what it leased beyond that goes back", async () => {
    const { proxy, client: c, end } = await proxied();
    const p = prefix();
    const store = new RedisStore({ client: c, prefix: p, timeoutMs: 1000, onStoreError: 'deny', lease: { max: 20, ttl: '5s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1m', key: () => 'k' }];
    const limiter = createLimiter({ rules, store });
    const plain = createLimiter({ rules, store: exact });
    const spec = limiter.rules[0]?.spec as RuleSpec;
    try {
      // Leases grow to 20; the last one is used up, so the next decision leases 20 again.
      for (let i = 0; i < 40; i++) await limiter.consume({});
      for (let i = 0; i < 40 && store.leased(spec, 'k') > 0; i++) await limiter.consume({});
      expect(store.leased(spec, 'k')).toBe(0);
      const counted = async () => 1000 - (await plain.get('r', 'k')).remaining;
      const before = await counted();
      proxy.delayMs = 2000;
      const late = await limiter.consume({});
      expect(late.degraded).toBe('deny');
      proxy.delayMs = 0;
      // Redis runs the call when the proxy lets it through: the request's own unit stays
      // counted (as an exact call's would), the other 19 go back once the answer arrives.
      for (let i = 0; i < 200 && (await counted()) !== before + 1; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await counted()).toBe(before + 1);
    } finally {
      await store.close();
      await exact.close();
      await end();
    }
  });

  it("a 'breaker' listener that throws during a lease call leaves no units counted that nobody holds, and the policy's answer stands (the decision rejected with the listener's error, the late call's 19 extra units stayed counted)", async () => {
    const { proxy, client: c, end } = await proxied();
    const p = prefix();
    const breaker = { failures: 1, cooldownMs: 60_000 };
    const store = new RedisStore({ client: c, prefix: p, timeoutMs: 1000, onStoreError: 'deny', breaker, lease: { max: 20, ttl: '5s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1m', key: () => 'k' }];
    const limiter = createLimiter({ rules, store });
    const plain = createLimiter({ rules, store: exact });
    const spec = limiter.rules[0]?.spec as RuleSpec;
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    const warned = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const changes: string[] = [];
    store.on('breaker', () => {
      throw new Error('listener bug');
    });
    store.on('breaker', (e: { to: string }) => changes.push(e.to));
    try {
      for (let i = 0; i < 40; i++) await limiter.consume({});
      for (let i = 0; i < 40 && store.leased(spec, 'k') > 0; i++) await limiter.consume({});
      expect(store.leased(spec, 'k')).toBe(0);
      const counted = async () => 1000 - (await plain.get('r', 'k')).remaining;
      const before = await counted();
      proxy.delayMs = 2000;
      // The lease call misses its deadline: the breaker opens, and its listener throws.
      const late = await limiter.consume({});
      expect(late.degraded).toBe('deny');
      expect(changes[0]).toBe('open');
      proxy.delayMs = 0;
      for (let i = 0; i < 200 && (await counted()) !== before + 1; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await counted()).toBe(before + 1);
      // Every change thrown (the late answer closes the breaker again), reported once.
      expect(store.listenerFailures).toBe(changes.length);
      const codes = warned.mock.calls.map((w) => (w[1] as { code?: string } | undefined)?.code);
      expect(codes.filter((code) => code === 'TOLLGATE_REDIS_LISTENER_FAILED')).toHaveLength(1);
      expect(unhandled).toEqual([]);
    } finally {
      warned.mockRestore();
      process.off('unhandledRejection', onUnhandled);
      await store.close();
      await exact.close();
      await end();
    }
  });

  it("a late lease call's surplus goes back at the latest supplied time (at the call's own time it stayed counted once the clock had moved on)", async () => {
    const { proxy, client: c, end } = await proxied();
    const clock = new ManualClock(9_500_000);
    const p = prefix();
    const store = new RedisStore({
      client: c,
      prefix: p,
      timeoutMs: 200,
      onStoreError: 'deny',
      breaker: { failures: 100 },
      lease: { max: 20, ttl: '1m' },
    });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW, clock });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1h', key: () => 'k' }];
    const limiter = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact });
    const counted = async () => 1000 - (await plain.get('r', 'k')).remaining;
    try {
      for (let i = 0; i < 30; i++) await limiter.consume({});
      // Past ttl: the next decision gives the lease's units back and leases 20 again.
      clock.advance(61_000);
      const before = (await counted()) - store.leased(limiter.rules[0]?.spec as RuleSpec, 'k');
      // Answered 2 s late: long after the next decision was sent, even on a loaded machine.
      proxy.delayMs = 1000;
      expect((await limiter.consume({})).degraded).toBe('deny');
      // The clock moves on and another decision is counted (a unit newer than the lease's)
      // before the late answer arrives and its surplus goes back.
      clock.advance(1000);
      expect((await limiter.consume({})).degraded).toBe('deny');
      proxy.delayMs = 0;
      // Each request's own unit stays counted, as an exact call's would; the 19 others go back.
      for (let i = 0; i < 120 && (await counted()) !== before + 2; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await counted()).toBe(before + 2);
    } finally {
      await store.close();
      await exact.close();
      await end();
    }
  });

  it("a late lease call's surplus does not go back into a key reset meanwhile on this instance (it credited the fresh state)", async () => {
    const { proxy, client: c, end } = await proxied();
    const clock = new ManualClock(9_600_000);
    const p = prefix();
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'fixed-window', limit: 100, window: '1h', key: () => 'k' }];
    const store = new RedisStore({ client: c, prefix: p, timeoutMs: 200, onStoreError: 'deny', lease: { max: 20, ttl: '1m' } });
    const other = new RedisStore({ client, prefix: p, timeoutMs: SLOW, denyCache: false });
    const limiter = createLimiter({ rules, store, clock });
    const b = createLimiter({ rules, store: other, clock });
    try {
      for (let i = 0; i < 30; i++) await limiter.consume({});
      // Past ttl: the next decision leases again, and misses its deadline.
      clock.advance(61_000);
      proxy.delayMs = 1500;
      const sent = Date.now();
      expect((await limiter.consume({})).degraded).toBe('deny');
      // The reset reaches Redis after the lease call (one connection), and misses its deadline too.
      await limiter.reset('r', 'k').catch(() => {});
      // Another instance counts 3 in the fresh state before the late answer reaches this one.
      await new Promise((r) => setTimeout(r, Math.max(0, sent + 2300 - Date.now())));
      for (let i = 0; i < 3; i++) expect((await b.consume({})).allowed).toBe(true);
      proxy.delayMs = 0;
      await new Promise((r) => setTimeout(r, Math.max(0, sent + 4000 - Date.now())));
      let admitted = 3;
      while (admitted < 200 && (await b.consume({})).allowed) admitted++;
      expect(admitted).toBe(100);
    } finally {
      await store.close();
      await other.close();
      await end();
    }
  });

  it('a clock stepping back ends the lease (its units go back); one stepping past ttl too; nothing is admitted twice', async () => {
    const clock = new ManualClock(9_000_000);
    const p = prefix();
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 10, ttl: '1s' } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW });
    const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 50, window: '1h', key: () => 'k' }];
    const limiter = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact, clock });
    const spec = () => limiter.rules[0]?.spec as RuleSpec;
    let admitted = 0;
    const take = async () => {
      if ((await limiter.consume({})).allowed) admitted++;
    };
    for (let i = 0; i < 4; i++) await take();
    expect(store.leased(spec(), 'k')).toBe(3);
    const before = await storeCallsOn(admin);
    clock.advance(-10_000);
    await take();
    // The lease was not used: a call to Redis, and the old lease's units went back.
    expect((await storeCallsOn(admin)) - before).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 20));
    expect((await plain.get('r', 'k')).remaining + store.leased(spec(), 'k')).toBe(50 - admitted);
    clock.advance(60_000);
    await take();
    await new Promise((r) => setTimeout(r, 20));
    // The lease taken while the clock was behind was counted in Redis' newest entry (time
    // going back is no time passing); given back at its own time it is not found there: its
    // units stay counted (lost, at most max), never admitted twice.
    const counted = 50 - (await plain.get('r', 'k')).remaining - store.leased(spec(), 'k');
    expect(counted).toBeGreaterThanOrEqual(admitted);
    expect(counted).toBeLessThanOrEqual(admitted + 10);
    for (let i = 0; i < 100; i++) await take();
    expect(admitted).toBeLessThanOrEqual(50);
    expect(admitted).toBeGreaterThanOrEqual(50 - 10);
    await store.close();
    await exact.close();
  });
});

describe('calls per decision', () => {
  it('far from the limit, at most 0.05 Redis calls per decision', async () => {
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 100, ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 1_000_000, window: '1m' }], store });
    await limiter.consume({});
    const before = await storeCallsOn(admin);
    const N = 5000;
    for (let i = 0; i < N; i++) await limiter.consume({});
    const calls = (await storeCallsOn(admin)) - before;
    expect(calls / N).toBeLessThanOrEqual(0.05);
    await store.close();
  });

  it('a burst in one tick takes one lease, not one per request', async () => {
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 100, ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 1_000_000, window: '1m' }], store });
    await limiter.consume({});
    const before = await storeCallsOn(admin);
    const ds = await Promise.all(Array.from({ length: 50 }, () => limiter.consume({})));
    expect(ds.every((d) => d.allowed)).toBe(true);
    // Lease sizes double from what the key used (2, 4, 8, ...): a handful of calls.
    expect((await storeCallsOn(admin)) - before).toBeLessThanOrEqual(8);
    await store.close();
  });
});

describe('keys without a recent lease', () => {
  /** Store calls for one tick of `n` decisions on `n` keys named `<tag><i>`. */
  async function oneTick(limiter: Limiter<{ id: string }>, tag: string, n: number): Promise<number> {
    const before = await storeCallsOn(admin);
    const ds = await Promise.all(Array.from({ length: n }, (_, i) => limiter.consume({ id: `${tag}${i}` })));
    expect(ds.every((d) => d.allowed && d.degraded === undefined)).toBe(true);
    return (await storeCallsOn(admin)) - before;
  }

  it('a flood of distinct keys fills at most maxKeys entries: past it, a new key decides exactly (the table grew without bound)', async () => {
    expect(codeOf(() => new RedisStore({ client, lease: { maxKeys: 0 } }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, lease: { maxKeys: 2.5 } }))).toBe('TG_INVALID_OPTION');
    const clock = new ManualClock(51_000_000);
    const p = prefix();
    const rules: Rule<{ id: string }>[] = [{ name: 'r', algorithm: 'sliding-log', limit: 1000, window: '1h', key: (r) => r.id }];
    const store = new RedisStore({ client, prefix: p, timeoutMs: SLOW, lease: { max: 20, ttl: '1m', maxKeys: 50 } });
    const exact = new RedisStore({ client, prefix: p, timeoutMs: SLOW, clock });
    const limiter = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact });
    const spec = limiter.rules[0]?.spec as RuleSpec;
    // With room, a key leases from its second decision on.
    let busy = 0;
    for (; busy < 10 && store.leased(spec, 'busy') < 2; busy++) await limiter.consume({ id: 'busy' });
    expect(store.leased(spec, 'busy')).toBeGreaterThanOrEqual(2);
    await oneTick(limiter, 'flood', 200);
    // Full: a new key decides exactly every time (one store call each), and counts exactly.
    const before = await storeCallsOn(admin);
    for (let i = 0; i < 5; i++) expect((await limiter.consume({ id: 'late' })).allowed).toBe(true);
    expect(store.leased(spec, 'late')).toBe(0);
    expect((await storeCallsOn(admin)) - before).toBe(5);
    // The busy key's lease, held before the flood, still answers without Redis.
    const held = store.leased(spec, 'busy');
    expect((await limiter.consume({ id: 'busy' })).allowed).toBe(true);
    expect(store.leased(spec, 'busy')).toBe(held - 1);
    await store.close();
    expect((await plain.get('r', 'late')).remaining).toBe(1000 - 5);
    expect((await plain.get('r', 'busy')).remaining).toBe(1000 - busy - 1);
    expect((await plain.get('r', 'flood7')).remaining).toBe(1000 - 1);
    await exact.close();
  });

  it('one-off keys in one tick cost the script calls they cost without leases, and again once their entries expire', async () => {
    const clock = new ManualClock(50_000_000);
    const rules: Rule<{ id: string }>[] = [{ name: 'r', limit: 1000, window: '1m', key: (r) => r.id }];
    const exactStore = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, clock });
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, clock, lease: { max: 100, ttl: '1s' } });
    const exact = createLimiter({ rules, store: exactStore });
    const leased = createLimiter({ rules, store });
    const N = 100;
    const exactCalls = await oneTick(exact, 'k', N);
    expect(exactCalls).toBe(1);
    expect(await oneTick(leased, 'k', N)).toBe(exactCalls);
    // Past ttl: each key's entry decided one request, so the keys decide exactly again.
    clock.advance(1001);
    expect(await oneTick(exact, 'k', N)).toBe(exactCalls);
    expect(await oneTick(leased, 'k', N)).toBe(exactCalls);
    expect(store.leased(leased.rules[0]?.spec as RuleSpec, 'k0')).toBe(0);
    // Counted in Redis as without leases: the same figures for the same key.
    const a = await exact.peek({ id: 'k7' });
    const b = await leased.peek({ id: 'k7' });
    // Two decisions counted, less the peeked request.
    expect(a.rules[0]?.remaining).toBe(997);
    expect(b.rules[0]?.remaining).toBe(997);
    await store.close();
    await exactStore.close();
  });

  it('a key first seen in a burst in one tick is decided in one call, then leases: at most 0.05 calls per decision', async () => {
    const store = new RedisStore({ client, prefix: prefix(), timeoutMs: SLOW, lease: { max: 100, ttl: '1s' } });
    const limiter = createLimiter({ rules: [{ name: 'r', limit: 1_000_000, window: '1m' }], store });
    const before = await storeCallsOn(admin);
    const ds = await Promise.all(Array.from({ length: 20 }, () => limiter.consume({})));
    expect(ds.every((d) => d.allowed)).toBe(true);
    expect((await storeCallsOn(admin)) - before).toBe(1);
    const N = 2000;
    for (let i = 0; i < N; i++) expect((await limiter.consume({})).allowed).toBe(true);
    expect(((await storeCallsOn(admin)) - before) / N).toBeLessThanOrEqual(0.05);
    await store.close();
  });
});

describe('Redis Cluster', () => {
  it('leases a stack in one slot; a stack across slots decides exactly; together the limit, exactly', async () => {
    const cluster = await startCluster();
    const c = new Cluster(cluster.startupNodes);
    try {
      const clock = new ManualClock(10_000_000);
      const stores = [0, 1].map(
        () => new RedisStore({ client: c, prefix: 'cl:', timeoutMs: SLOW, instances: 2, lease: { max: 10, ttl: '1s' } }),
      );
      // Same key: one slot (the default hash tag is the key). Different keys: likely two slots.
      const rules: Rule<{ a: string; b: string }>[] = [
        { name: 'x', limit: 60, window: '1m', key: (r) => r.a },
        { name: 'y', limit: 1000, window: '1m', key: (r) => r.b },
      ];
      const limiters = stores.map((store) => createLimiter({ rules, store, clock }));
      let same = 0;
      let across = 0;
      for (let i = 0; i < 100; i++) {
        const l = limiters[i % 2] as (typeof limiters)[number];
        if ((await l.consume({ a: 'k1', b: 'k1' })).allowed) same++;
        if ((await l.consume({ a: 'k2', b: 'other' })).allowed) across++;
      }
      expect(same).toBeLessThanOrEqual(60);
      expect(across).toBe(60);
      clock.advance(1000);
      for (let i = 0; i < 100; i++)
        if ((await (limiters[i % 2] as (typeof limiters)[number]).consume({ a: 'k1', b: 'k1' })).allowed) same++;
      expect(same).toBe(60);
      for (const s of stores) await s.close();
    } finally {
      c.disconnect();
      await cluster.destroy();
    }
  }, 60_000);
});
