/**
 * Key TTLs on Redis time: every write leaves its key a TTL that lasts at least
 * until the entry's expiry and not much longer. The store script keeps a key's TTL
 * (SET ... KEEPTTL) when a write leaves the expiry unchanged (a fixed or sliding window
 * written again within its window) and sets a new one when it moves; both must hold.
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';

let server: RedisServer;
let client: Redis;
let n = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(client, 'ttl:*')).toEqual([]);
  client.disconnect();
  await server.destroy();
});

/** Redis' clock (ms) and the key's remaining TTL (ms), read together. */
async function expiryOf(key: string): Promise<{ now: number; pttl: number }> {
  const [[, t], [, pttl]] = (await client.multi().time().pttl(key).exec()) as [[null, [string, string]], [null, number]];
  return { now: Number(t[0]) * 1000 + Math.floor(Number(t[1]) / 1000), pttl };
}

const W = 400;

/** Waits (Redis time runs on its own) until `ms` after the start of a `w`-aligned window. */
async function intoWindow(ms: number, w = W): Promise<void> {
  const { now } = await expiryOf('none');
  const into = now % w;
  const wait = into <= ms ? ms - into : w - into + ms;
  await new Promise((r) => setTimeout(r, wait));
}

describe('TTLs on Redis time', () => {
  const cases: { label: string; rule: Omit<Rule<unknown>, 'name' | 'key'>; expiry: (start: number) => number }[] = [
    // The entry lives until its window ends.
    { label: 'fixed-window', rule: { algorithm: 'fixed-window', limit: 1000, window: W }, expiry: (start) => start + W },
    // A window with a count lives until the next one has ended (it is its "previous").
    { label: 'sliding-window', rule: { algorithm: 'sliding-window', limit: 1000, window: W }, expiry: (start) => start + 2 * W },
  ];
  for (const { label, rule, expiry } of cases) {
    it(`${label}: writes within a window keep a TTL that covers it, a new window moves it`, async () => {
      const store = new RedisStore({ client, prefix: 'ttl:', timeoutMs: 5_000, denyCache: false });
      const l = createLimiter({ rules: [{ ...rule, name: 'r', key: () => 'k' }], store, prefix: `t${n++}` });
      const [op] = l.resolve({});
      if (op === undefined) throw new Error('no op');
      const key = store.keyOf(op.rule, op.key);
      // Every write's expiry; the test needs writes again within a window (the TTL kept)
      // and in a later window (the TTL moved).
      const ends: number[] = [];
      for (let round = 0; round < 2; round++) {
        await intoWindow(20);
        for (let i = 0; i < 5; i++) {
          const d = await l.consume({});
          expect(d.degraded).toBeUndefined();
          expect(d.allowed).toBe(true);
          const end = expiry(d.at - (d.at % W));
          const { now, pttl } = await expiryOf(key);
          // The key outlives its entry (to the ms Redis rounds to), and by no more than the
          // time the writing script took.
          expect(pttl).toBeGreaterThan(0);
          expect(now + pttl).toBeGreaterThanOrEqual(end - 1);
          expect(now + pttl).toBeLessThanOrEqual(end + 50);
          ends.push(end);
        }
      }
      expect(new Set(ends).size).toBeGreaterThanOrEqual(2);
      expect(ends.some((e, i) => i > 0 && e === ends[i - 1])).toBe(true);
      await store.close();
    });
  }

  it('rules of one group with different windows (two limiters) count under keys of their own, each TTL to its own window end', async () => {
    // A 400 ms and an 800 ms window naming one group: the rule's kind (algorithm and window)
    // is part of its key, so neither reads or re-times the other's entry.
    const store = new RedisStore({ client, prefix: 'ttl:', timeoutMs: 5_000, denyCache: false });
    const prefix = `g${n++}`;
    const short = createLimiter({
      rules: [{ name: 'a', group: 'shared', key: () => 'k', algorithm: 'fixed-window', limit: 1000, window: W }],
      store,
      prefix,
    });
    const long = createLimiter({
      rules: [{ name: 'b', group: 'shared', key: () => 'k', algorithm: 'fixed-window', limit: 1000, window: 2 * W }],
      store,
      prefix,
    });
    const [op] = long.resolve({});
    const [shortOp] = short.resolve({});
    if (op === undefined || shortOp === undefined) throw new Error('no op');
    const key = store.keyOf(op.rule, op.key);
    const shortKey = store.keyOf(shortOp.rule, shortOp.key);
    expect(shortKey).not.toBe(key);
    await intoWindow(20, 2 * W);
    expect((await short.consume({})).allowed).toBe(true);
    const d = await long.consume({});
    expect(d.allowed).toBe(true);
    const end = d.at - (d.at % (2 * W)) + 2 * W;
    const { now, pttl } = await expiryOf(key);
    if (now >= d.at - (d.at % (2 * W)) + W)
      throw new Error('the two writes missed the first half of the window; the machine is too slow for this test');
    expect(now + pttl).toBeGreaterThanOrEqual(end - 1);
    const s = await expiryOf(shortKey);
    expect(s.now + s.pttl).toBeLessThanOrEqual(d.at - (d.at % W) + W + 1);
    await store.close();
  });
});
