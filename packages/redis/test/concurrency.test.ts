/**
 * `RedisSlotStore` (SPEC 8.3) on a real redis-server: slots as leases that a crashed
 * instance cannot leak, renewal while held, all-or-nothing per-key + global slots, and
 * waiters woken across instances.
 */
import { type ConcurrencyOutcome, createConcurrency, ManualClock, ManualTimers, TollgateError } from '@tollgate/core';
import { RedisSlotStore, SLOT_SCRIPT_SHA } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../../../test/setup/redis.js';

let server: RedisServer;
let client: Redis;
let n = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: true });
  await client.connect();
});

afterAll(async () => {
  client.disconnect();
  await server.destroy();
});

type Req = { k: string };
const key = (r: Req) => r.k;

function fresh(clock = new ManualClock(1_000_000)) {
  const prefix = `t${++n}:`;
  return { clock, prefix, store: new RedisSlotStore({ client, clock, prefix }) };
}

function admitted(o: ConcurrencyOutcome | undefined): o is ConcurrencyOutcome & { admitted: true } {
  return o?.admitted === true;
}

describe('RedisSlotStore', () => {
  it('holds at most max leases per key; release frees them and leaves no key behind', async () => {
    const { store, prefix } = fresh();
    const grants = [];
    for (let i = 0; i < 4; i++) grants.push(await store.acquire('k', `id${i}`, 3, 30_000));
    expect(grants.map((g) => g.acquired)).toEqual([true, true, true, false]);
    expect(grants.map((g) => g.inFlight)).toEqual([1, 2, 3, 3]);
    expect(await store.acquire('k', 'id1', 3, 30_000)).toEqual({ acquired: true, inFlight: 3 }); // held ids are re-entrant
    const ttl = await client.pttl(`${prefix}k`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30_000);
    for (let i = 0; i < 3; i++) await store.release('k', `id${i}`);
    await store.release('k', 'id0'); // releasing twice is a no-op
    expect(await store.count('k')).toBe(0);
    expect(await client.exists(`${prefix}k`)).toBe(0);
  });

  it('bug: a slot key of another type (a string, a hash, a list) made every acquire fail, so every request passed for good; it is forgotten and the limit holds', async () => {
    for (const [what, poison] of [
      ['a string', (k: string) => client.set(k, 'garbage')],
      ['a hash', (k: string) => client.hset(k, 'f', 'v')],
      ['a list', (k: string) => client.rpush(k, 'x')],
    ] as const) {
      const { store, prefix } = fresh();
      await poison(`${prefix}k`);
      const grants = [];
      for (let i = 0; i < 3; i++) grants.push(await store.acquire('k', `id${i}`, 2, 30_000));
      expect(
        grants.map((g) => g.acquired),
        what,
      ).toEqual([true, true, false]);
      expect(await client.type(`${prefix}k`)).toBe('zset');
      expect(await client.pttl(`${prefix}k`)).toBeGreaterThan(0);
      for (let i = 0; i < 2; i++) await store.release('k', `id${i}`);
      expect(await store.count('k')).toBe(0);
    }
  });

  it('a killed instance leaks nothing: its leases lapse after the lease, and no key is left without expiry', async () => {
    const clock = new ManualClock(5_000_000);
    const { store, prefix } = fresh(clock);
    const timers = new ManualTimers(clock);
    const crashed = createConcurrency<Req>({ max: 3, global: 10, key, store, timers, lease: '30s' });
    for (let i = 0; i < 3; i++) expect((await crashed.acquire({ k: 'a' }))?.admitted).toBe(true);
    // The instance dies: it neither releases nor renews.
    await crashed.close();
    expect(await keysWithoutExpiry(client, `${prefix}*`)).toEqual([]);
    const survivor = createConcurrency<Req>({ max: 3, global: 10, key, store, timers, lease: '30s' });
    expect(await survivor.acquire({ k: 'a' })).toMatchObject({ admitted: false, status: 429 });
    clock.advance(29_999);
    expect(await store.count('tg-cc:concurrency:a')).toBe(3);
    clock.advance(1);
    expect(await store.count('tg-cc:concurrency:a')).toBe(0);
    expect(await store.count('tg-cc:concurrency:*')).toBe(0);
    const o = await survivor.acquire({ k: 'a' });
    expect(admitted(o)).toBe(true);
    if (admitted(o)) o.release();
    await survivor.close();
    await new Promise((r) => setTimeout(r, 20));
    expect(await client.keys(`${prefix}*`)).toEqual([]);
  });

  it('held slots are renewed every third of the lease, so a long request keeps its slot', async () => {
    const clock = new ManualClock(9_000_000);
    const { store, prefix } = fresh(clock);
    const timers = new ManualTimers(clock);
    const limit = createConcurrency<Req>({ max: 1, key, store, timers, lease: '3s' });
    const o = await limit.acquire({ k: 'a' });
    for (let i = 0; i < 10; i++) {
      await timers.advance(1000);
      await new Promise((r) => setTimeout(r, 5)); // the renewal's round trip
    }
    expect(await store.count('tg-cc:concurrency:a')).toBe(1);
    expect(await limit.acquire({ k: 'a' })).toMatchObject({ admitted: false });
    if (admitted(o)) o.release();
    await new Promise((r) => setTimeout(r, 20));
    expect(await client.keys(`${prefix}*`)).toEqual([]);
    await limit.close();
    expect(timers.pending).toBe(0);
  });

  it('a waiter on one instance gets the slot another instance releases (polling a shared store)', async () => {
    const clock = new ManualClock(0);
    const { store } = fresh(clock);
    const timers = new ManualTimers(clock);
    const a = createConcurrency<Req>({ max: 1, key, store, timers });
    const b = createConcurrency<Req>({ max: 1, queue: 1, queueTimeout: '5s', key, store, timers, pollInterval: '100ms' });
    const held = await a.acquire({ k: 'x' });
    let got: ConcurrencyOutcome | undefined;
    void b.acquire({ k: 'x' }).then((o) => {
      got = o;
    });
    await new Promise((r) => setTimeout(r, 20));
    await timers.advance(300);
    expect(got).toBeUndefined();
    if (admitted(held)) held.release();
    await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 5 && got === undefined; i++) {
      await timers.advance(100);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(admitted(got)).toBe(true);
    if (admitted(got)) got.release();
    await a.close();
    await b.close();
    expect(timers.pending).toBe(0);
  });

  it('loads its script again after SCRIPT FLUSH (NOSCRIPT)', async () => {
    const { store } = fresh();
    await store.count('k');
    await client.script('FLUSH');
    expect(((await client.script('EXISTS', SLOT_SCRIPT_SHA)) as number[])[0]).toBe(0);
    expect((await store.acquire('k', 'x', 1, 1000)).acquired).toBe(true);
    await store.release('k', 'x');
  });

  it('never hangs on an absent Redis: TG_STORE_TIMEOUT within timeoutMs', async () => {
    const dead = new Redis({ port: 1, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: null });
    dead.on('error', () => {});
    const store = new RedisSlotStore({ client: dead, timeoutMs: 100 });
    const started = Date.now();
    await expect(store.acquire('k', 'x', 1, 1000)).rejects.toMatchObject({ code: 'TG_STORE_TIMEOUT' });
    expect(Date.now() - started).toBeLessThan(1000);
    dead.disconnect();
  });

  it('rejects bad options with stable codes', () => {
    expect(() => new RedisSlotStore({} as never)).toThrow(TollgateError);
    expect(() => new RedisSlotStore({ client, prefix: '{x}' })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => new RedisSlotStore({ client, nope: 1 } as never)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
  });
});
