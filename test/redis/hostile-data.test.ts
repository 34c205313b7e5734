/**
 * Hostile data and careless configuration in the stores (docs/reliability.md, "Hostile
 * data and careless configuration"), on MemoryStore and on RedisStore, standalone and
 * Cluster:
 *
 * - two limiters naming a rule alike with another algorithm or window never read each
 *   other's state (a change of limit keeps it);
 * - a value the script cannot decode, or a key of another Redis type, is decided as absent
 *   and overwritten: no script error, no other stack of the batch touched;
 * - a Cluster `hashTag` function sees the key as the rule's key function returned it.
 */
import { createLimiter, type Limiter, ManualClock, MemoryStore, type Rule, type Store, TollgateError } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotOf } from '../../packages/redis/src/keys.js';
import { keysWithoutExpiry, type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';

let server: RedisServer;
let standalone: Redis;
let cluster: RedisCluster;
let clustered: Cluster;
/** Failures reported by any Redis store below: none is expected. */
const failures: unknown[] = [];
const SLOW = 10_000;
let n = 0;

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startCluster()]);
  standalone = new Redis({ port: server.port, host: '127.0.0.1' });
  clustered = new Cluster(cluster.startupNodes);
  await Promise.all([standalone.ping(), clustered.ping()]);
});

afterAll(async () => {
  expect(failures).toEqual([]);
  expect(await keysWithoutExpiry(standalone, 'hd*')).toEqual([]);
  expect(await keysWithoutExpiry(clustered, 'hd*')).toEqual([]);
  standalone.disconnect();
  clustered.disconnect();
  await Promise.all([server.destroy(), cluster.destroy()]);
});

type Req = { k: string };
const byKey = (r: Req) => r.k;

interface Kind {
  name: string;
  store(extra?: { hashTag?: (rule: string, key: string) => string }): Store;
  redis?: () => Redis | Cluster;
}

function redisStore(client: Redis | Cluster, extra: object = {}): RedisStore {
  // 'deny': a failed script run would show as refusals marked degraded, never as a pass.
  const store = new RedisStore({ client, prefix: 'hd:', timeoutMs: SLOW, onStoreError: 'deny', denyCache: false, ...extra });
  store.on('error', (e) => failures.push(e));
  return store;
}

const KINDS: Kind[] = [
  { name: 'MemoryStore', store: () => new MemoryStore({ sweepIntervalMs: 0 }) },
  { name: 'RedisStore (standalone)', store: (extra) => redisStore(standalone, extra), redis: () => standalone },
  { name: 'RedisStore (cluster)', store: (extra) => redisStore(clustered, extra), redis: () => clustered },
];

/** How many of `count` requests in a row are admitted. */
async function admitted(l: Limiter<Req>, req: Req, count: number): Promise<number> {
  let yes = 0;
  for (let i = 0; i < count; i++) {
    const d = await l.consume(req);
    expect(d.degraded).toBeUndefined();
    if (d.allowed) yes++;
  }
  return yes;
}

for (const kind of KINDS) {
  describe(`${kind.name}: one rule name, two ways of counting`, () => {
    it('same rule name with another algorithm on one store: each limiter keeps its own state, no script error (bug: attempt to perform arithmetic on local cur)', async () => {
      const store = kind.store();
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30));
      const prefix = `a${n++}`;
      const fixed = createLimiter<Req>({
        rules: [{ name: 'ip', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' }],
        store,
        clock,
        prefix,
      });
      // The default algorithm (sliding-window) under the same name and prefix.
      const sliding = createLimiter<Req>({ rules: [{ name: 'ip', key: byKey, limit: 5, window: '1m' }], store, clock, prefix });
      const bystander = createLimiter<Req>({ rules: [{ name: 'other', key: byKey, limit: 100, window: '1m' }], store, clock, prefix });
      const req = { k: '203.0.113.7' };
      // Batched with a bystander's stacks in one tick, as concurrent requests are.
      const first = await Promise.all([
        fixed.consume(req),
        sliding.consume(req),
        bystander.consume({ k: 'b1' }),
        bystander.consume({ k: 'b2' }),
      ]);
      for (const d of first) {
        expect(d.degraded).toBeUndefined();
        expect(d.allowed).toBe(true);
      }
      expect(await admitted(fixed, req, 5)).toBe(2);
      expect(await admitted(sliding, req, 10)).toBe(4);
      expect((await bystander.peek({ k: 'b1' })).rules[0]?.remaining).toBe(98);
      await store.close();
    });

    it('same rule name with another window on one store: neither resets the other (bug: a 1 min fixed window reset a 1 h one)', async () => {
      const store = kind.store();
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30));
      const prefix = `w${n++}`;
      const minute = createLimiter<Req>({
        rules: [{ name: 'ip', key: byKey, algorithm: 'fixed-window', limit: 100, window: '1m' }],
        store,
        clock,
        prefix,
      });
      const hour = createLimiter<Req>({
        rules: [{ name: 'ip', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1h' }],
        store,
        clock,
        prefix,
      });
      const req = { k: 'alice' };
      let hourly = 0;
      for (let i = 0; i < 6; i++) {
        expect((await minute.consume(req)).allowed).toBe(true);
        if ((await hour.consume(req)).allowed) hourly++;
        clock.advance(61_000);
      }
      expect(hourly).toBe(3);
      await store.close();
    });

    it('a change of limit keeps the state: the same rule with a higher limit sees what was used', async () => {
      const store = kind.store();
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30));
      const prefix = `l${n++}`;
      const rule = (limit: number): Rule<Req> => ({ name: 'ip', key: byKey, algorithm: 'fixed-window', limit, window: '1h' });
      const low = createLimiter<Req>({ rules: [rule(3)], store, clock, prefix });
      const high = createLimiter<Req>({ rules: [rule(5)], store, clock, prefix });
      const req = { k: 'bob' };
      expect(await admitted(low, req, 4)).toBe(3);
      // Three of five used: two more.
      expect(await admitted(high, req, 4)).toBe(2);
      await store.close();
    });
  });
}

describe('a group is one way of counting', () => {
  it('rules of one stack in one group with different windows are refused at construction', () => {
    let err: unknown;
    try {
      createLimiter<Req>({
        rules: [
          { name: 'a', group: 'g', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' },
          { name: 'b', group: 'g', key: () => 'x', algorithm: 'fixed-window', limit: 9, window: '1h' },
        ],
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TollgateError);
    expect((err as TollgateError).code).toBe('TG_INVALID_OPTION');
    expect((err as TollgateError).path).toBe('rules[1].group');
    // Limits may differ.
    createLimiter<Req>({
      rules: [
        { name: 'a', group: 'g', key: byKey, algorithm: 'fixed-window', limit: 3, window: '1m' },
        { name: 'b', group: 'g', key: () => 'x', algorithm: 'fixed-window', limit: 9, window: '1m' },
      ],
    });
  });
});

/** Values no build of ours wrote, for a fixed-window rule (four doubles: block, TTL expiry, start, count). */
const f64 = (...xs: number[]): Buffer => {
  const b = Buffer.alloc(8 * xs.length);
  xs.forEach((x, i) => {
    b.writeDoubleLE(x, 8 * i);
  });
  return b;
};
const POISON: [string, (r: Redis, key: string) => Promise<unknown>][] = [
  ['a short text', (r, k) => r.set(k, 'hello', 'PX', 60_000)],
  ['a number as text', (r, k) => r.set(k, '5', 'PX', 60_000)],
  ['an empty string', (r, k) => r.set(k, '', 'PX', 60_000)],
  ['NaN fields', (r, k) => r.set(k, Buffer.alloc(32, 0xff), 'PX', 60_000)],
  ['an infinite block', (r, k) => r.set(k, f64(Number.POSITIVE_INFINITY, 0, 0, 1), 'PX', 60_000)],
  ['a block past any TTL', (r, k) => r.set(k, f64(1e300, 0, 0, 1), 'PX', 60_000)],
  ['a window start of 1e17', (r, k) => r.set(k, f64(0, 0, 1e17, 1), 'PX', 60_000)],
  ['another algorithm\u2019s width (a sliding-window counter)', (r, k) => r.set(k, f64(0, 0, 0, 1, 2), 'PX', 60_000)],
  ['an older build\u2019s entry (no TTL expiry)', (r, k) => r.set(k, f64(0, Date.now(), 1), 'PX', 60_000)],
  ['a hash', (r, k) => r.hset(k, 'f', 'v')],
  ['a list', (r, k) => r.rpush(k, 'a', 'b')],
  ['a set', (r, k) => r.sadd(k, 'a')],
];

for (const kind of KINDS.filter((k) => k.redis !== undefined)) {
  describe(`${kind.name}: one bad value, one affected stack`, () => {
    for (const [what, poison] of POISON) {
      it(`a batch of 50 stacks where one key holds ${what}: every stack decided, none charged twice (bug: one undecodable value failed the whole batched run)`, async () => {
        const store = kind.store() as RedisStore;
        const prefix = `p${n++}`;
        // Mid-minute and still: on Redis time, a minute boundary between the consumes and the peeks reset the counts.
        const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30));
        const l = createLimiter<Req>({
          rules: [
            { name: 'ip', key: byKey, algorithm: 'fixed-window', limit: 5, window: '1m' },
            { name: 'all', key: () => 'all', algorithm: 'fixed-window', limit: 1000, window: '1m' },
          ],
          store,
          clock,
          prefix,
        });
        const [op] = l.resolve({ k: 'k7' });
        if (op === undefined) throw new Error('no op');
        const bad = store.keyOf(op.rule, op.key);
        const client = (kind.redis as () => Redis | Cluster)() as Redis;
        await poison(client, bad);
        const reqs = Array.from({ length: 50 }, (_, i) => ({ k: `k${i}` }));
        const ds = await Promise.all(reqs.map((r) => l.consume(r)));
        for (const d of ds) {
          expect(d.degraded).toBeUndefined();
          expect(d.allowed).toBe(true);
        }
        // Decided as absent: the poisoned key's rule has one request counted, like the others.
        expect(ds[7]?.rules[0]?.remaining).toBe(4);
        const after = await Promise.all(reqs.map((r) => l.peek(r)));
        for (const d of after) expect(d.rules[0]?.remaining).toBe(3);
        expect(after[0]?.rules[1]?.remaining).toBe(1000 - 50 - 1);
        // Overwritten with an entry of ours, with a TTL; a refund reads it without error.
        expect(await client.type(bad)).toBe('string');
        const pttl = await client.pttl(bad);
        expect(pttl).toBeGreaterThan(0);
        expect(pttl).toBeLessThanOrEqual(60_000);
        await store.close();
      });
    }

    it('a refund on a key of another type (a hash) is no script error and leaves the key to the next write', async () => {
      const store = kind.store() as RedisStore;
      const prefix = `r${n++}`;
      const l = createLimiter<Req>({
        rules: [{ name: 'ip', key: byKey, algorithm: 'sliding-log', limit: 3, window: '1m' }],
        store,
        prefix,
      });
      const d = await l.consume({ k: 'x' });
      const [op] = l.resolve({ k: 'x' });
      if (op === undefined) throw new Error('no op');
      const key = store.keyOf(op.rule, op.key);
      const client = (kind.redis as () => Redis | Cluster)() as Redis;
      await client.del(key);
      await client.hset(key, 'f', 'v');
      await client.pexpire(key, 60_000);
      const before = failures.length;
      await store.refund([op], d.at);
      expect(failures.slice(before)).toEqual([]);
      expect(await client.type(key)).toBe('hash');
      expect(await admitted(l, { k: 'x' }, 4)).toBe(3);
      await store.close();
    });
  });
}

describe('RedisStore (cluster): hashTag sees the key the rule returned', () => {
  const tenantOf = (_rule: string, key: string) => key.split(':')[0] as string;

  for (const [what, user] of [
    ['a space', 'ann smith'],
    ['non-ASCII text', 'zoë-日本'],
    ['over 128 characters', 'u'.repeat(200)],
  ] as const) {
    it(`the docs' recipe key.split(':')[0] keeps a tenant's stack in one slot for a user key with ${what} (bug: the function received #<sha256>)`, async () => {
      const seen: string[] = [];
      const store = kind('cluster').store({
        hashTag: (rule, key) => {
          seen.push(key);
          return tenantOf(rule, key);
        },
      }) as RedisStore;
      const prefix = `t${n++}`;
      const l = createLimiter<{ t: string; u: string }>({
        rules: [
          { name: 'user', key: (r) => `${r.t}:${r.u}`, limit: 3, window: '1m' },
          { name: 'tenant', key: (r) => `${r.t}:all`, limit: 100, window: '1m' },
          { name: 'route', key: (r) => `${r.t}:GET /things`, limit: 100, window: '1m' },
        ],
        store,
        // Still time: on Redis time, a minute boundary among the four consumes let a fourth through the sliding window.
        clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
        prefix,
      });
      const req = { t: 'acme', u: user };
      const ops = l.resolve(req);
      const slots = new Set(ops.map((op) => slotOf(store.keyOf(op.rule, op.key, op.raw))));
      expect(slots.size).toBe(1);
      expect(seen).toContain(`acme:${user}`);
      const calls = await scriptCalls();
      let yes = 0;
      for (let i = 0; i < 4; i++) if ((await l.consume(req)).allowed) yes++;
      expect(yes).toBe(3);
      // One script run per decision: the stack never spans slots.
      expect((await scriptCalls()) - calls).toBe(4);
      // Another tenant's user with the same name counts apart.
      expect((await l.consume({ t: 'globex', u: user })).allowed).toBe(true);
      await store.close();
    });
  }
});

function kind(name: 'cluster'): Kind {
  return KINDS.find((k) => k.name.includes(name)) as Kind;
}

/** EVALSHA and EVAL calls so far, over every master of the Cluster. */
async function scriptCalls(): Promise<number> {
  let total = 0;
  for (const node of clustered.nodes('master')) {
    const info = await node.info('commandstats');
    for (const m of info.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)) total += Number(m[1]);
  }
  return total;
}

/** The doubles of a stored entry: block, TTL expiry, then the state's fields. */
async function entryOf(client: Redis, key: string): Promise<number[]> {
  const raw = await client.getBuffer(key);
  if (raw === null) throw new Error(`no entry at ${key}`);
  const xs: number[] = [];
  for (let i = 0; i + 8 <= raw.length; i += 8) xs.push(raw.readDoubleLE(i));
  return xs;
}

// A well-formed entry whose count is below zero: no write of ours holds one (refunds and
// rewards stop at zero), and read as it is, -1000 is a thousand units of credit.
const NEGATIVE: [NonNullable<Rule<Req>['algorithm']>, (fields: number[]) => number[]][] = [
  ['fixed-window', ([b, x, start]) => [b, x, start, -1000] as number[]],
  ['sliding-window', ([b, x, start, prev]) => [b, x, start, prev, -1000] as number[]],
  ['sliding-log', ([b, x, t]) => [b, x, t, -1000] as number[]],
  ['sliding-buckets', ([b, x, t]) => [b, x, t, -1000] as number[]],
];

for (const kind of KINDS.filter((k) => k.redis !== undefined)) {
  describe(`${kind.name}: a count below zero is a value we did not write`, () => {
    for (const [algorithm, poison] of NEGATIVE) {
      it(`${algorithm}: an entry counting -1000 is read as absent, 5 of 20 admitted against limit 5 (bug: 20 of 20)`, async () => {
        const store = kind.store() as RedisStore;
        const l = createLimiter<Req>({
          rules: [{ name: 'ip', key: byKey, algorithm, limit: 5, window: '1m' }],
          store,
          // Still time: on Redis time, a minute boundary among the 20 consumes opened a fresh budget.
          clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
          prefix: `n${n++}`,
        });
        await l.consume({ k: 'a' });
        const [op] = l.resolve({ k: 'a' });
        if (op === undefined) throw new Error('no op');
        const key = store.keyOf(op.rule, op.key);
        const client = (kind.redis as () => Redis | Cluster)() as Redis;
        await client.set(key, f64(...poison(await entryOf(client, key))), 'PX', 60_000);
        // An operation by key reads it as absent too: a full budget, never more.
        const state = await l.get('ip', 'a');
        expect(state.remaining).toBe(5);
        expect(state.exists).toBe(false);
        expect(await admitted(l, { k: 'a' }, 20)).toBe(5);
        await store.close();
      });
    }

    it('token-bucket: a debt (tokens below zero, from countRejected) is kept, not read as a full bucket', async () => {
      const store = kind.store() as RedisStore;
      const l = createLimiter<Req>({
        rules: [{ name: 'ip', key: byKey, algorithm: 'token-bucket', limit: 5, window: '1m', countRejected: true }],
        store,
        // Still time: the debt is measured, not raced against the refill.
        clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
        prefix: `n${n++}`,
      });
      await l.consume({ k: 'a' });
      const [op] = l.resolve({ k: 'a' });
      if (op === undefined) throw new Error('no op');
      const key = store.keyOf(op.rule, op.key);
      const client = (kind.redis as () => Redis | Cluster)() as Redis;
      const [b, x, last] = (await entryOf(client, key)) as [number, number, number];
      // Ten tokens owed (scaled by the window, as the bucket stores them).
      await client.set(key, f64(b, x, last, -10 * 60_000), 'PX', 60_000);
      expect(await admitted(l, { k: 'a' }, 5)).toBe(0);
      await store.close();
    });
  });
}
