/**
 * RedisStore's own behaviour beside the conformance suite: option validation (SPEC 12),
 * the NOSCRIPT reply code, the breaker's state machine, the local deny cache (SPEC 6.5)
 * answering without a round trip, the instance-scaled local fallback, and close().
 */
import { createLimiter, ManualClock, MemoryStore, type Store, TollgateError } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { Breaker, type BreakerState } from '../src/breaker.js';
import { DENY_CACHE_MAX_AGE_MS } from '../src/deny-cache.js';
import { scaleRule } from '../src/fallback.js';
import { replyCode } from '../src/script.js';

let server: RedisServer;
let client: Redis;
let admin: Redis;
/** A deadline no loaded test machine reaches: these tests are about decisions, not timeouts. */
const SLOW = 10_000;
let n = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, host: '127.0.0.1' });
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(admin, 'unit:*')).toEqual([]);
  client.disconnect();
  admin.disconnect();
  await server.destroy();
});

async function evalshaCalls(): Promise<number> {
  const info = await admin.info('commandstats');
  // The store's calls: FCALL where the server has functions, EVALSHA where it has not.
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+)/g)) n += Number(m[1]);
  return n;
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
  it('rejects unknown and malformed options at construction with stable codes', () => {
    expect(codeOf(() => new RedisStore({ client, timeout: 5 } as never))).toBe('TG_UNKNOWN_OPTION');
    expect(codeOf(() => new RedisStore({ client: {} as never }))).toBe('TG_INVALID_OPTION');
    // A look-alike without ioredis' Buffer-reply script commands (the decide reply is binary).
    const { evalsha, eval: evalScript, del } = client;
    const lookAlike = { evalsha: evalsha.bind(client), eval: evalScript.bind(client), del: del.bind(client) };
    expect(codeOf(() => new RedisStore({ client: lookAlike as never }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, timeoutMs: SLOW, prefix: 'a{b}' }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, timeoutMs: 0 }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, onStoreError: 'throw' as never }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, instances: 1.5 }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, clock: {} as never }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, hashTag: 'tenant' as never }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, denyCache: -1 }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, breaker: { failures: 0 } }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, minTtlMs: -5 }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, batch: 'yes' as never }))).toBe('TG_INVALID_OPTION');
    expect(codeOf(() => new RedisStore({ client, timeoutMs: SLOW, prefix: 'ok:', clock: 'redis', onStoreError: 'deny' }))).toBeUndefined();
  });

  it('breaker option typo is refused instead of silently ignored', () => {
    // { failure: 10 } used to leave the default threshold of 3 in place without a word.
    expect(codeOf(() => new RedisStore({ client, breaker: { failure: 10 } as never }))).toBe('TG_UNKNOWN_OPTION');
    expect(() => new RedisStore({ client, breaker: { cooldown: 5000 } as never })).toThrow(/RedisStore\.breaker\.cooldown: /);
    expect(codeOf(() => new RedisStore({ client, timeoutMs: SLOW, breaker: { failures: 5, cooldownMs: 0 } }))).toBeUndefined();
  });

  it('says what was expected, what was received and how to fix it', () => {
    expect(() => new RedisStore({ client, timeoutMs: -1 })).toThrow(/RedisStore\.timeoutMs: expected a number of ms > 0, received -1\. /);
  });
});

describe('NOSCRIPT detection', () => {
  it('reads the code word of a Redis error reply, never an arbitrary message', () => {
    expect(replyCode(new ReplyError('NOSCRIPT No matching script. Please use EVAL.'))).toBe('NOSCRIPT');
    expect(replyCode(new ReplyError('ERR Error running script: NOSCRIPT in user text'))).toBe('ERR');
    expect(replyCode(new Error('NOSCRIPT No matching script.'))).toBeUndefined();
    expect(replyCode('NOSCRIPT')).toBeUndefined();
  });

  it('a real NOSCRIPT reply is recognised', async () => {
    const err = await client.evalsha('0'.repeat(40), 0).catch((e: unknown) => e);
    expect(replyCode(err)).toBe('NOSCRIPT');
  });
});

describe('breaker', () => {
  function breaker(failures = 2, cooldownMs = 100) {
    let now = 0;
    const changes: string[] = [];
    const b = new Breaker(
      { failures, cooldownMs },
      () => now,
      (from: BreakerState, to: BreakerState) => changes.push(`${from}>${to}`),
    );
    return { b, changes, advance: (ms: number) => (now += ms) };
  }

  it('opens after N consecutive failures, probes once after the cool-down, closes on success', () => {
    const { b, changes, advance } = breaker();
    b.failure();
    b.success();
    b.failure();
    expect(b.state).toBe('closed');
    b.failure();
    expect(b.state).toBe('open');
    expect(b.tryCall()).toBe(false);
    expect(b.retryInMs()).toBe(100);
    advance(99);
    expect(b.tryCall()).toBe(false);
    advance(1);
    expect(b.tryCall()).toBe(true);
    expect(b.state).toBe('half-open');
    expect(b.tryCall()).toBe(false); // one probe at a time
    b.success();
    expect(b.state).toBe('closed');
    expect(changes).toEqual(['closed>open', 'open>half-open', 'half-open>closed']);
  });

  it('a failed probe opens it again for a full cool-down', () => {
    const { b, advance } = breaker(1, 50);
    b.failure();
    advance(50);
    expect(b.tryCall()).toBe(true);
    b.failure();
    expect(b.state).toBe('open');
    expect(b.retryInMs()).toBe(50);
  });
});

describe('local deny cache', () => {
  const rules = [{ name: 'r', key: () => 'k', algorithm: 'fixed-window' as const, limit: 2, window: '10s' as const }];

  it('answers a known rejection locally until its retry time, then asks Redis again', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock });
    const l = createLimiter({ rules, store, clock, prefix: `dc${n++}` });
    await l.consume({});
    await l.consume({});
    const first = await l.consume({});
    expect(first.allowed).toBe(false);
    const before = await evalshaCalls();
    clock.advance(400);
    const local = await l.consume({});
    expect(local).toMatchObject({ allowed: false, retryAfterMs: first.retryAfterMs - 400, rejectedBy: ['r'] });
    expect(await evalshaCalls()).toBe(before);
    clock.advance(first.retryAfterMs - 400);
    expect((await l.consume({})).allowed).toBe(true);
    expect(await evalshaCalls()).toBe(before + 1);
  });

  it('bug: a reset (or unblock) made by another instance was not seen until the block ended: an entry answers for at most DENY_CACHE_MAX_AGE_MS', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const prefix = `dc${n++}`;
    const blocking = [
      { name: 'login', key: () => 'k', algorithm: 'fixed-window' as const, limit: 1, window: '10s' as const, blockFor: '1h' as const },
    ];
    const a = createLimiter({ rules: blocking, store: new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock }), clock, prefix });
    const b = createLimiter({ rules: blocking, store: new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock }), clock, prefix });
    await a.consume({});
    expect((await a.consume({})).retryAfterMs).toBe(3_600_000);
    const before = await evalshaCalls();
    await b.reset('login', 'k');
    // Instance a still answers from its cache for the rest of the bound...
    clock.advance(DENY_CACHE_MAX_AGE_MS - 1);
    expect((await a.consume({})).rules[0]?.reason).toBe('blocked');
    expect(await evalshaCalls()).toBe(before);
    // ...and asks Redis from then on, which knows of no block.
    clock.advance(1);
    expect((await a.consume({})).allowed).toBe(true);
    await a.store.close();
    await b.store.close();
  });

  it('bug: answers from the deny cache on Redis time gave fractional retryAfterMs and resetMs (e.g. 287.58), not whole ms like Redis', async () => {
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:' });
    // The window opens at the first request: a clock-aligned 10 s window ending among these
    // calls would admit the third, or end the cached refusal (asking Redis, which admits).
    const fromFirst = [
      { name: 'r', key: () => 'k', algorithm: 'fixed-window' as const, align: 'first-request' as const, limit: 2, window: '10s' as const },
    ];
    const l = createLimiter({ rules: fromFirst, store, prefix: `dc${n++}` });
    await l.consume({});
    await l.consume({});
    const first = await l.consume({});
    expect(first.allowed).toBe(false);
    const before = await evalshaCalls();
    for (let i = 0; i < 5; i++) {
      // Some local time passes between answers (performance.now() is fractional).
      await new Promise((r) => setTimeout(r, 3));
      const local = await l.consume({});
      expect(local.allowed).toBe(false);
      for (const x of [local.retryAfterMs, local.at, local.rules[0]?.retryAfterMs, local.rules[0]?.resetMs]) {
        expect(Number.isInteger(x), `${x} is whole ms`).toBe(true);
      }
      expect(local.retryAfterMs).toBeLessThanOrEqual(first.retryAfterMs);
    }
    expect(await evalshaCalls(), 'answered by the deny cache').toBe(before);
    await store.close();
  });

  it('bug: the deny cache replayed a rejection from before an admission of another cost on the same key (stale remaining)', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock });
    const l = createLimiter<{ n: number }>({
      rules: [{ name: 'r', key: () => 'k', algorithm: 'fixed-window', limit: 3, window: '10s', cost: (req) => req.n }],
      store,
      clock,
      prefix: `dc${n++}`,
    });
    expect((await l.consume({ n: 1 })).allowed).toBe(true);
    const first = await l.consume({ n: 3 });
    expect(first).toMatchObject({ allowed: false });
    expect(first.rules[0]?.remaining).toBe(2);
    expect((await l.consume({ n: 2 })).allowed).toBe(true);
    const again = await l.consume({ n: 3 });
    expect(again.allowed).toBe(false);
    expect(again.rules[0]?.remaining, 'as Redis would answer now').toBe(0);
    await store.close();
  });

  it('bug: the deny cache replayed a dry-run rule as refused after its window had ended (found by the equivalence test)', async () => {
    const start = 1_600_000_000_000;
    const rules = [
      { name: 'shadow', key: () => 'k', algorithm: 'fixed-window' as const, limit: 2, window: 1, dryRun: true },
      { name: 'slow', key: () => 'k', algorithm: 'fixed-window' as const, limit: 2, window: 1000 },
      { name: 'fast', key: () => 'k', algorithm: 'fixed-window' as const, limit: 1, window: 1 },
    ];
    const run = async (store: Store, clock: ManualClock) => {
      const l = createLimiter<{ n: number }>({
        rules: rules.map((r) => ({ ...r, cost: (q: { n: number }) => q.n })),
        store,
        clock,
        prefix: `dc${n++}`,
      });
      await l.consume({ n: 1 });
      expect((await l.consume({ n: 2 })).allowed).toBe(false);
      clock.advance(1);
      return l.consume({ n: 2 });
    };
    const rClock = new ManualClock(start);
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock: rClock });
    const mClock = new ManualClock(start);
    const viaRedis = await run(store, rClock);
    // The dry-run rule's window is new: it admits the request (still refused by 'slow').
    expect(viaRedis.rules[0]).toMatchObject({ name: 'shadow', allowed: true, remaining: 2 });
    expect(viaRedis).toEqual(await run(new MemoryStore({ clock: mClock }), mClock));
    await store.close();
  });

  it('is cleared by a refund and a reset through the store, and is off with denyCache: false', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock });
    const l = createLimiter({ rules, store, clock, prefix: `dc${n++}` });
    const a = await l.consume({});
    await l.consume({});
    expect((await l.consume({})).allowed).toBe(false);
    await l.refund({}, a);
    expect((await l.consume({})).allowed).toBe(true);
    expect((await l.consume({})).allowed).toBe(false);
    await l.reset({});
    expect((await l.consume({})).allowed).toBe(true);

    const off = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock, denyCache: false });
    const lo = createLimiter({ rules, store: off, clock, prefix: `dc${n++}` });
    await lo.consume({});
    await lo.consume({});
    await lo.consume({});
    const before = await evalshaCalls();
    await lo.consume({});
    expect(await evalshaCalls()).toBe(before + 1);
  });

  it("deny cache replayed one limiter's rejection to another limiter whose rule shares the name (and counter) but admits more", async () => {
    // A route-level 'ip' rule of 1 per 10 s and an app-level 'ip' rule of 5 per 10 s count
    // under the same Redis key. The route's refusal must not refuse the app-level check,
    // which Redis (and MemoryStore) admit: the shared count is 1 of 5.
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock });
    const prefix = `dc${n++}`;
    const rule = { name: 'ip', key: () => 'k', algorithm: 'fixed-window' as const, window: '10s' as const };
    const strict = createLimiter({ rules: [{ ...rule, limit: 1 }], store, clock, prefix });
    const lenient = createLimiter({ rules: [{ ...rule, limit: 5 }], store, clock, prefix });
    expect((await strict.consume({})).allowed).toBe(true);
    expect((await strict.consume({})).allowed).toBe(false);
    const d = await lenient.consume({});
    expect(d.allowed).toBe(true);
    expect(d.rules[0]?.remaining).toBe(3);
    // The lenient admission wrote the shared key, so the strict limiter's cached refusal
    // describes a state that is gone: its repeat asks Redis once, and the next is local.
    const before = await evalshaCalls();
    expect((await strict.consume({})).allowed).toBe(false);
    expect(await evalshaCalls()).toBe(before + 1);
    expect((await strict.consume({})).allowed).toBe(false);
    expect(await evalshaCalls()).toBe(before + 1);
  });

  it('does not cache a stack with a rule that counts rejected requests (the store would count them)', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock });
    const l = createLimiter({ rules: [{ ...rules[0], countRejected: true } as (typeof rules)[0]], store, clock, prefix: `dc${n++}` });
    await l.consume({});
    await l.consume({});
    await l.consume({});
    const before = await evalshaCalls();
    await l.consume({});
    expect(await evalshaCalls()).toBe(before + 1);
  });
});

describe('round trips', () => {
  it('a stack of three rules of different algorithms is one EVALSHA', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock });
    const l = createLimiter({
      rules: [
        { name: 'a', key: () => 'k', algorithm: 'sliding-window', limit: 10, window: '1m' },
        { name: 'b', key: () => 'k', algorithm: 'token-bucket', limit: 10, window: '1s' },
        { name: 'c', key: () => 'other', algorithm: 'leaky-bucket', limit: 10, window: '1m' },
      ],
      store,
      clock,
      prefix: `rt${n++}`,
    });
    await l.consume({});
    const before = await evalshaCalls();
    for (let i = 0; i < 5; i++) expect((await l.consume({})).allowed).toBe(true);
    expect(await evalshaCalls()).toBe(before + 5);
  });
});

describe('hashTag', () => {
  it('a hashTag returning a number (a numeric tenant id) failed every decision with a TypeError', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const hashTag = ((_rule: string, key: string) => Number(key.split(':')[0])) as unknown as (rule: string, key: string) => string;
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock, hashTag });
    expect(store.keyOf({ id: 'x:r' } as never, '42:alice')).toBe('unit:x:r{42}42:alice');
    const l = createLimiter({ rules: [{ name: 'r', key: () => '42:alice', limit: 1, window: '1m' }], store, clock, prefix: `ht${n++}` });
    expect((await l.consume({})).allowed).toBe(true);
    expect((await l.consume({})).allowed).toBe(false);
  });
});

describe('batching', () => {
  const rules = [
    { name: 'user', key: (r: { u: string }) => r.u, algorithm: 'sliding-log' as const, limit: 3, window: '1m' as const },
    { name: 'all', key: () => 'all', algorithm: 'token-bucket' as const, limit: 10, window: '1m' as const },
  ];

  it('stacks requested in the same tick go as one script run, decided in order, each all-or-nothing', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock, denyCache: false });
    const l = createLimiter({ rules, store, clock, prefix: `bt${n++}` });
    const before = await evalshaCalls();
    const users = ['a', 'a', 'a', 'a', 'b', 'b', 'c', 'c', 'c', 'd', 'd', 'e', 'e', 'e'];
    const ds = await Promise.all(users.map((u) => l.consume({ u })));
    expect(await evalshaCalls()).toBe(before + 1);
    // The global bucket holds 10: the first 10 that fit admit, in order; the 4th "a" is
    // refused by its user rule and consumes nothing from the global bucket.
    expect(ds.map((d) => d.allowed)).toEqual([true, true, true, false, true, true, true, true, true, true, true, false, false, false]);
    expect(ds[3]?.rejectedBy).toEqual(['user']);
    expect(ds[11]?.rejectedBy).toEqual(['all']);
    // The same requests one by one on a fresh prefix decide the same.
    const seq = createLimiter({ rules, store, clock, prefix: `bt${n++}` });
    const one = [];
    for (const u of users) one.push(await seq.consume({ u }));
    expect(ds.map((d) => [d.allowed, d.rules])).toEqual(one.map((d) => [d.allowed, d.rules]));
  });

  it('batch: false sends one script run per stack', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:', clock, batch: false });
    const l = createLimiter({ rules, store, clock, prefix: `bt${n++}` });
    const before = await evalshaCalls();
    await Promise.all(['a', 'b', 'c', 'd'].map((u) => l.consume({ u })));
    expect(await evalshaCalls()).toBe(before + 4);
  });
});

describe('local fallback', () => {
  it('divides every limit by the expected number of instances, rounding up, at least 1', () => {
    const [rule] = createLimiter({ rules: [{ name: 'r', algorithm: 'token-bucket', limit: 10, burst: 25, window: '1s' }] }).rules;
    const scaled = scaleRule(rule?.spec as never, 4);
    expect(scaled).toMatchObject({ limit: 3, burst: 7, maxCost: 7, id: rule?.spec.id });
    expect(scaleRule(rule?.spec as never, 100)).toMatchObject({ limit: 1, burst: 1 });
    expect(scaleRule(rule?.spec as never, 1)).toBe(rule?.spec);
  });
});

describe('close', () => {
  it('refuses calls after close() with TG_STORE_CLOSED and leaves the client open', async () => {
    const store = new RedisStore({ client, timeoutMs: SLOW, prefix: 'unit:' });
    await store.close();
    const l = createLimiter({ rules: [{ name: 'r', rate: '5/s' }], store, prefix: 'closed' });
    await expect(l.consume({})).rejects.toMatchObject({ code: 'TG_STORE_CLOSED' });
    expect(await client.ping()).toBe('PONG');
  });
});
