/**
 * A tick's lease calls against a real Redis: the lease requests asked in one tick are one
 * script call, as are the give-backs of one tick, and they decide and count exactly what
 * one call per request (`batch: false`) does. Calls are counted with `INFO commandstats`.
 */
import { createLimiter, type Limiter, ManualClock, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { storeCallsOn } from '../../../test/setup/redis-paths.js';

let server: RedisServer;
let client: Redis;
let admin: Redis;
let n = 0;
const SLOW = 10_000;
/** Keys asked in each tick. */
const N = 40;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1' });
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(admin, 'calls*')).toEqual([]);
  client.disconnect();
  admin.disconnect();
  await server.destroy();
});

type Req = { id: string };

/** One tick: a request on each of the N keys; its admissions and the script calls it cost. */
async function tick(limiter: Limiter<Req>): Promise<{ allowed: boolean[]; calls: number }> {
  const before = await storeCallsOn(admin);
  const ds = await Promise.all(Array.from({ length: N }, (_, i) => limiter.consume({ id: `k${i}` })));
  expect(ds.every((d) => d.degraded === undefined)).toBe(true);
  return { allowed: ds.map((d) => d.allowed), calls: (await storeCallsOn(admin)) - before };
}

/** What Redis counts for each key, read by a store without leases. */
async function counted(rules: Rule<Req>[], prefix: string, clock: ManualClock | undefined): Promise<number[][]> {
  const store = new RedisStore({ client, prefix, timeoutMs: SLOW, ...(clock === undefined ? {} : { clock }) });
  const limiter = createLimiter({ rules, store });
  const out: number[][] = [];
  for (let i = 0; i < N; i++) out.push((await limiter.peek({ id: `k${i}` })).rules.map((r) => r.remaining));
  await store.close();
  return out;
}

/** A store that batches and one that sends each call alone, each with its own prefix. */
function pair(rules: Rule<Req>[], clock: ManualClock | undefined) {
  const prefixes = [`calls${++n}:`, `calls${++n}:`] as const;
  // ttl far below the window and far above a tick on a loaded machine: no lease runs out by wall time.
  const stores = [true, false].map(
    (batch, i) =>
      new RedisStore({
        client,
        prefix: prefixes[i] as string,
        timeoutMs: SLOW,
        batch,
        lease: { max: 100, ttl: '1m' },
        ...(clock === undefined ? {} : { clock }),
      }),
  ) as [RedisStore, RedisStore];
  const limiters = stores.map((store) => createLimiter({ rules, store })) as [Limiter<Req>, Limiter<Req>];
  return { prefixes, stores, limiters };
}

/**
 * The same ticks on a batching store and on one that sends each call alone: the same
 * admissions, the same counts in Redis, and the batching store's lease calls and
 * give-backs one call a tick.
 */
async function compare(rules: Rule<Req>[], clock: ManualClock | undefined): Promise<void> {
  const run = pair(rules, clock);
  const [batched, alone] = run.limiters;
  // Tick 1 decides exactly (no lease yet), tick 2 leases every key, then the leases are
  // spent, leased again at sizes shrinking near the limit (5), and refused past it.
  for (let t = 1; t <= 7; t++) {
    const a = await tick(batched);
    const b = await tick(alone);
    expect(a.allowed).toEqual(b.allowed);
    if (t === 2) {
      expect(b.calls).toBe(N);
      expect(a.calls).toBe(1);
    }
    if (t <= 5) expect(a.allowed.every((x) => x)).toBe(true);
    else expect(a.allowed.some((x) => x)).toBe(false);
  }
  for (const store of run.stores) await store.close();
  expect(await counted(rules, run.prefixes[0], clock)).toEqual(await counted(rules, run.prefixes[1], clock));

  // Two ticks: every key then holds leased units, which close gives back, in one call.
  const gb = pair(rules, clock);
  for (let t = 1; t <= 2; t++) expect((await tick(gb.limiters[0])).allowed).toEqual((await tick(gb.limiters[1])).allowed);
  for (const [i, store] of gb.stores.entries()) {
    let held = 0;
    // Rule b's keys are `b<id>` (see the second test).
    for (const r of gb.limiters[i]?.rules ?? [])
      for (let k = 0; k < N; k++) held += store.leased(r.spec, `${r.spec.name === 'b' ? 'b' : ''}k${k}`);
    expect(held).toBe(N * rules.length);
    const before = await storeCallsOn(admin);
    await store.close();
    expect((await storeCallsOn(admin)) - before).toBe(i === 0 ? 1 : N * rules.length);
  }
  expect(await counted(rules, gb.prefixes[0], clock)).toEqual(await counted(rules, gb.prefixes[1], clock));
}

describe("a tick's lease calls", () => {
  it('N keys each wanting a lease in one tick are one script call, deciding and counting as one call each (supplied clock)', async () => {
    const clock = new ManualClock(70_000_000);
    await compare([{ name: 'r', limit: 5, window: '1h', key: (r) => r.id }], clock);
  });

  it('N two-rule stacks each wanting leases in one tick are one script call, on Redis time', async () => {
    // Windows from each key's first request: the figures do not depend on when each store ran.
    const rules: Rule<Req>[] = [
      { name: 'a', limit: 5, window: '1h', algorithm: 'fixed-window', align: 'first-request', key: (r) => r.id },
      { name: 'b', limit: 1000, window: '1h', algorithm: 'fixed-window', align: 'first-request', key: (r) => `b${r.id}` },
    ];
    await compare(rules, undefined);
  });
});
