/**
 * Redis Cluster specifics: slot computation, hash tags co-locating a stack,
 * stacks spanning slots (reserve-then-refund, all-or-nothing), refunds in Redis-time mode,
 * and scripts reloaded on the node that owns the slot after SCRIPT FLUSH.
 */
import { constant, createLimiter, ManualClock, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotOf } from '../../packages/redis/src/keys.js';
import { keysWithoutExpiry, type RedisCluster, startCluster } from '../setup/redis.js';

let cluster: RedisCluster;
let client: Cluster;
/** A deadline no loaded test machine reaches: these tests are about decisions, not timeouts. */
const SLOW = 10_000;
let n = 0;
const prefix = () => `cl${n++}`;
/** Failures of any store below: none may fall back to the local store unnoticed. */
const failures: unknown[] = [];
function watched(store: RedisStore): RedisStore {
  store.on('error', (e) => failures.push(e));
  return store;
}

beforeAll(async () => {
  cluster = await startCluster();
  client = new Cluster(cluster.startupNodes);
  await client.ping();
});

afterAll(async () => {
  expect(failures).toEqual([]);
  expect(await keysWithoutExpiry(client, 'cl:*')).toEqual([]);
  client.disconnect();
  await cluster.destroy();
});

describe('Redis Cluster', () => {
  it('slotOf agrees with CLUSTER KEYSLOT, hash tags included', async () => {
    const keys = ['a', 'tg:ip{1.2.3.4}', 'x{}y', '{}{a}', 'p{tenant-7}k', 'ü{ß}', '#abc{def', 'tg:user{#Zm9v}'];
    for (let i = 0; i < 40; i++) keys.push(`k${Math.random().toString(36).slice(2)}{${i}}`);
    for (const k of keys) expect(slotOf(k)).toBe(await client.cluster('KEYSLOT', k));
  });

  it('a stack whose rules count under one key shares a slot; hashTag co-locates different keys', () => {
    const l = createLimiter({ rules: [{ name: 'a', rate: '5/s' }], prefix: 'p' });
    const spec = l.rules[0]?.spec;
    if (!spec) throw new Error('no rule');
    const plain = new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:' });
    expect(slotOf(plain.keyOf(spec, 'tenant1:u1'))).not.toBe(slotOf(plain.keyOf(spec, 'tenant1:u2')));
    const tagged = new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:', hashTag: (_rule, key) => key.split(':')[0] as string });
    expect(slotOf(tagged.keyOf(spec, 'tenant1:u1'))).toBe(slotOf(tagged.keyOf(spec, 'tenant1:u2')));
    expect(tagged.keyOf(spec, 'tenant1:u1')).not.toBe(tagged.keyOf(spec, 'tenant1:u2'));
  });

  it('a stack spanning slots is all-or-nothing: a rejecting slot refunds the slots that admitted', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rules: Rule<{ u: string }>[] = [
      { name: 'user', key: (r) => r.u, algorithm: 'sliding-log', limit: 10, window: '1m' },
      { name: 'global', key: constant('all'), algorithm: 'fixed-window', limit: 3, window: '1m' },
    ];
    const store = watched(new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:', denyCache: false }));
    const l = createLimiter({ rules, store, clock, prefix: prefix() });
    const [o0, o1] = l.resolve({ u: 'alice' });
    expect(slotOf(store.keyOf(o0?.rule as never, o0?.key as string))).not.toBe(slotOf(store.keyOf(o1?.rule as never, o1?.key as string)));
    for (let i = 0; i < 3; i++) expect((await l.consume({ u: 'alice' })).allowed).toBe(true);
    const rejected = await l.consume({ u: 'alice' });
    expect(rejected.allowed).toBe(false);
    expect(rejected.rejectedBy).toEqual(['global']);
    // The user rule admitted in its slot, then was refunded: 3 units used, not 4. A peek the
    // global rule refuses reports the user rule untouched, as on one slot: 10 - 3.
    const p = await l.peek({ u: 'alice' });
    expect(p.allowed).toBe(false);
    expect(p.rules[0]?.remaining).toBe(7);
    // And its resetMs is its state's: the oldest of the three entries leaves the window in 1 min.
    expect(p.rules[0]?.resetMs).toBe(60_000);
  });

  it('refunds of a spanning stack decided on Redis time give back in every slot', async () => {
    const rules: Rule<{ u: string }>[] = [
      { name: 'user', key: (r) => r.u, algorithm: 'sliding-log', limit: 5, window: '1h' },
      { name: 'global', key: constant('all'), algorithm: 'sliding-log', limit: 50, window: '1h' },
    ];
    const store = watched(new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:' }));
    const l = createLimiter({ rules, store, prefix: prefix() });
    for (let i = 0; i < 20; i++) {
      const d = await l.consume({ u: 'bob' });
      expect(d.allowed).toBe(true);
      await l.refund({ u: 'bob' }, d);
    }
    // Nothing used: a peek reports the full quota less its own cost.
    const p = await l.peek({ u: 'bob' });
    expect(p.rules.map((r) => r.remaining)).toEqual([4, 49]);
  });

  it('a stack in one slot (hashTag) is one script call (FCALL or EVALSHA); spread over slots, one per slot', async () => {
    const calls = async () => {
      let total = 0;
      for (const node of client.nodes('master')) {
        for (const m of (await node.info('commandstats')).matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+)/g)) total += Number(m[1]);
      }
      return total;
    };
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rules: Rule<{ t: string; u: string }>[] = [
      { name: 'user', key: (r) => `${r.t}:${r.u}`, limit: 10, window: '1m' },
      { name: 'tenant', key: (r) => r.t, algorithm: 'token-bucket', limit: 100, window: '1m' },
    ];
    const tagged = watched(
      new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:', clock, hashTag: (_rule, key) => key.split(':')[0] as string }),
    );
    const lt = createLimiter({ rules, store: tagged, clock, prefix: prefix() });
    await lt.consume({ t: 'acme', u: 'ann' });
    let before = await calls();
    for (let i = 0; i < 4; i++) expect((await lt.consume({ t: 'acme', u: 'ann' })).allowed).toBe(true);
    expect((await calls()) - before).toBe(4);

    const plain = watched(new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:', clock }));
    const lp = createLimiter({ rules, store: plain, clock, prefix: prefix() });
    const [a, b] = lp.resolve({ t: 'acme', u: 'ann' });
    expect(slotOf(plain.keyOf(a?.rule as never, a?.key as string))).not.toBe(slotOf(plain.keyOf(b?.rule as never, b?.key as string)));
    await lp.consume({ t: 'acme', u: 'ann' });
    before = await calls();
    for (let i = 0; i < 4; i++) expect((await lp.consume({ t: 'acme', u: 'ann' })).allowed).toBe(true);
    expect((await calls()) - before).toBe(8);
  });

  it('after SCRIPT FLUSH on every master, decisions reload the script and count once', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = watched(new RedisStore({ client, timeoutMs: SLOW, prefix: 'cl:', denyCache: false }));
    const l = createLimiter({
      rules: [{ name: 'r', key: (r: { k: string }) => r.k, algorithm: 'fixed-window', limit: 10, window: '1m' }],
      store,
      clock,
      prefix: prefix(),
    });
    for (let i = 0; i < 4; i++) {
      await Promise.all(client.nodes('master').map((node) => node.script('FLUSH')));
      const d = await l.consume({ k: `key${i % 2}` });
      expect(d.allowed).toBe(true);
      expect(d.rules[0]?.remaining).toBe(10 - (Math.floor(i / 2) + 1));
    }
  });
});
