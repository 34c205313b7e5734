/**
 * Acceptance tests of issue 3 on a real redis-server: atomicity under concurrency (with a
 * naive control that is not atomic), instances with skewed clocks sharing one window
 * through Redis time, and script-cache loss (SCRIPT FLUSH) between decisions. The race runs
 * on every client the store takes (the library's FCALL), on the EVALSHA fallback of a
 * client whose ACL refuses FUNCTION (every client), with one instance on each path (two
 * versions of an app on one server), and on a three-master Cluster (each client with one
 * instance on each path).
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CLIENTS, type Connected } from '../setup/clients.js';
import { keysWithoutExpiry, type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';
import { addScriptsUser, loginFor, scriptCalls } from '../setup/redis-paths.js';

let server: RedisServer;
let a: Redis;
let b: Redis;
/** Two more instances on the script fallback, and two on a Cluster (functions, scripts). */
let sa: Redis;
let sb: Redis;
let cluster: RedisCluster;
let cla: Cluster;
let clb: Cluster;
let n = 0;

beforeAll(async () => {
  server = await startRedis();
  await addScriptsUser(server.port);
  a = new Redis({ port: server.port, host: '127.0.0.1' });
  b = new Redis({ port: server.port, host: '127.0.0.1' });
  sa = new Redis({ port: server.port, host: '127.0.0.1', ...loginFor('scripts') });
  sb = new Redis({ port: server.port, host: '127.0.0.1', ...loginFor('scripts') });
  cluster = await startCluster();
  for (const node of cluster.nodes) await addScriptsUser(node.port);
  cla = new Cluster(cluster.startupNodes);
  clb = new Cluster(cluster.startupNodes, { redisOptions: loginFor('scripts') });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(a, 'race:*')).toEqual([]);
  expect(await keysWithoutExpiry(cla, 'race:*')).toEqual([]);
  const calls = await scriptCalls(a);
  expect(calls.fcall).toBeGreaterThan(0);
  expect(calls.evalsha).toBeGreaterThan(0);
  for (const c of [a, b, sa, sb, cla, clb]) c.disconnect();
  await server.destroy();
  await cluster.destroy();
});

const ALGORITHMS: { label: string; rule: Omit<Rule<unknown>, 'name' | 'key'> }[] = [
  { label: 'fixed-window clock', rule: { algorithm: 'fixed-window', limit: 50, window: '1m' } },
  { label: 'fixed-window first-request', rule: { algorithm: 'fixed-window', align: 'first-request', limit: 50, window: '1m' } },
  { label: 'sliding-log', rule: { algorithm: 'sliding-log', limit: 50, window: '1m' } },
  { label: 'sliding-window', rule: { algorithm: 'sliding-window', limit: 50, window: '1m' } },
  { label: 'token-bucket', rule: { algorithm: 'token-bucket', limit: 50, window: '1m' } },
  { label: 'leaky-bucket meter', rule: { algorithm: 'leaky-bucket', limit: 50, window: '1m' } },
  { label: 'leaky-bucket queue', rule: { algorithm: 'leaky-bucket', mode: 'queue', limit: 50, window: '1m' } },
  { label: 'sliding-buckets', rule: { algorithm: 'sliding-buckets', limit: 50, window: '1m' } },
];

const ROUNDS = 20;
const CONCURRENT = 400;

/** A client the test connected itself: closed by the test's own afterAll. */
const kept = (client: object): Connected => ({ client, close: async () => undefined });
/** Each pair: its two instances' connections, and how many rounds. */
const PAIRS: [string, () => Promise<[Connected, Connected]>, number][] = [
  ...CLIENTS.map((kind): [string, () => Promise<[Connected, Connected]>, number] => [
    `${kind.name}, functions`,
    async () => [await kind.standalone(server.port), await kind.standalone(server.port)],
    ROUNDS,
  ]),
  ['ioredis, scripts', async () => [kept(sa), kept(sb)], ROUNDS],
  ...CLIENTS.filter((kind) => kind.name !== 'ioredis').map((kind): [string, () => Promise<[Connected, Connected]>, number] => [
    `${kind.name}, scripts`,
    async () => [await kind.standalone(server.port, loginFor('scripts')), await kind.standalone(server.port, loginFor('scripts'))],
    ROUNDS,
  ]),
  ['ioredis, one instance on each path', async () => [kept(a), kept(sa)], ROUNDS],
  ['ioredis Cluster, one instance on each path', async () => [kept(cla), kept(clb)], 5],
  ...CLIENTS.filter((kind) => kind.name !== 'ioredis').map((kind): [string, () => Promise<[Connected, Connected]>, number] => {
    const ports = () => cluster.startupNodes.map((node) => node.port);
    return [
      `${kind.name} Cluster, one instance on each path`,
      async () => [await kind.cluster(ports()), await kind.cluster(ports(), loginFor('scripts'))],
      5,
    ];
  }),
];

describe.each(PAIRS)('race: two instances (%s), 400 concurrent decisions for one key, limit 50', (_label, pair, rounds) => {
  // Each instance has its own connection.
  let ca: Connected;
  let cb: Connected;
  beforeAll(async () => {
    [ca, cb] = await pair();
  });
  afterAll(async () => {
    await ca.close();
    await cb.close();
  });
  // Time is fixed per round (a store clock) so that no refill or window boundary can
  // legitimately admit a 51st: the only way to exceed 50 is a non-atomic decision.
  for (const { label, rule } of ALGORITHMS) {
    it(`${label}: exactly 50 admitted in each of ${rounds} rounds`, async () => {
      const t0 = Date.UTC(2026, 0, 1);
      for (let round = 0; round < rounds; round++) {
        const clock = { now: () => t0 + round * 3_600_000 };
        const rules = [{ ...rule, name: 'r', key: () => `k${round}` }];
        const prefix = `race${n++}`;
        const storeA = new RedisStore({ client: ca.client, prefix: 'race:', clock, denyCache: false, timeoutMs: 10_000 });
        const storeB = new RedisStore({ client: cb.client, prefix: 'race:', clock, denyCache: false, timeoutMs: 10_000 });
        const la = createLimiter({ rules, store: storeA, prefix });
        const lb = createLimiter({ rules, store: storeB, prefix });
        const decisions = await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => (i % 2 ? la : lb).consume({})));
        expect(decisions.filter((d) => d.degraded !== undefined)).toEqual([]);
        expect(decisions.filter((d) => d.allowed).length).toBe(50);
      }
    });
  }
});

describe('race control', () => {
  it('control: a naive GET-then-INCR limiter over-admits in at least one round', async () => {
    const counts: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const key = `race:naive:${n++}`;
      let admitted = 0;
      const naive = async (c: Redis) => {
        const v = Number((await c.get(key)) ?? 0);
        if (v < 50) {
          await c.multi().incr(key).pexpire(key, 60_000).exec();
          admitted++;
        }
      };
      await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => naive(i % 2 ? a : b)));
      counts.push(admitted);
    }
    expect(Math.max(...counts)).toBeGreaterThan(50);
  });
});

describe('clock skew: instances whose clocks are 20 s apart', () => {
  const rules = [{ name: 'r', key: () => 'k', algorithm: 'sliding-log' as const, limit: 5, window: '10s' as const }];

  it('share one window through Redis time', async () => {
    const prefix = `skew${n++}`;
    const behind = createLimiter({ rules, store: new RedisStore({ client: a, timeoutMs: 10_000, prefix: 'race:' }), prefix });
    const ahead = createLimiter({ rules, store: new RedisStore({ client: b, timeoutMs: 10_000, prefix: 'race:' }), prefix });
    // The limiters pass no clock, so the store reads Redis' TIME. The "ahead" instance's local
    // clock runs 20 s fast while it decides; it must not matter.
    const realNow = Date.now.bind(Date);
    const ds = [];
    for (let i = 0; i < 8; i++) {
      const spy = i % 2 ? vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 20_000) : undefined;
      try {
        ds.push(await (i % 2 ? ahead : behind).consume({}));
      } finally {
        spy?.mockRestore();
      }
    }
    expect(ds.filter((d) => d.allowed).length).toBe(5);
    const rejected = ds.filter((d) => !d.allowed);
    // Both instances see the same window end.
    const ends = rejected.map((d) => d.at + d.retryAfterMs);
    expect(Math.max(...ends) - Math.min(...ends)).toBeLessThanOrEqual(5);
  });

  it('control: with their own skewed clocks they do not', async () => {
    const prefix = `skew${n++}`;
    const now = Date.now();
    const behind = createLimiter({
      rules,
      store: new RedisStore({ client: a, timeoutMs: 10_000, prefix: 'race:', clock: { now: () => now } }),
      prefix,
    });
    const ahead = createLimiter({
      rules,
      store: new RedisStore({ client: b, timeoutMs: 10_000, prefix: 'race:', clock: { now: () => now + 20_000 } }),
      prefix,
    });
    let admitted = 0;
    for (let i = 0; i < 5; i++) if ((await behind.consume({})).allowed) admitted++;
    for (let i = 0; i < 5; i++) if ((await ahead.consume({})).allowed) admitted++;
    expect(admitted).toBe(10);
  });
});

describe('script cache loss', () => {
  it('SCRIPT FLUSH between decisions neither fails nor double-counts a decision', async () => {
    const prefix = `flush${n++}`;
    const errors: unknown[] = [];
    const store = new RedisStore({ client: a, timeoutMs: 10_000, prefix: 'race:', denyCache: false });
    store.on('error', (e) => errors.push(e));
    const l = createLimiter({
      rules: [{ name: 'r', key: () => 'k', algorithm: 'fixed-window', limit: 10, window: '1h', align: 'first-request' }],
      store,
      prefix,
    });
    for (let i = 1; i <= 6; i++) {
      await b.script('FLUSH');
      const d = await l.consume({});
      expect(d.allowed).toBe(true);
      expect(d.degraded).toBeUndefined();
      expect(d.rules[0]?.remaining).toBe(10 - i);
    }
    expect(errors).toEqual([]);
  });
});
