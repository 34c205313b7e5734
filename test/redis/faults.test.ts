/**
 * Failure policy acceptance tests: Redis killed mid-run and restarted,
 * with ioredis' offline queue on and off, under each `onStoreError` policy; and a Redis
 * slowed past `timeoutMs` by `DEBUG SLEEP`. No decision may wait longer than
 * `timeoutMs` plus a small margin, and the store returns to Redis by itself.
 *
 * The only real-clock waits here are the outage itself: the breaker cool-down (150 ms)
 * and ioredis' reconnect delay (50 ms).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import { createLimiter, type Decision, type Limiter, ManualClock } from '@tollgate/core';
import { type BreakerEvent, REDIS_CHANNEL_NAMES, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DelayProxy } from '../reliability/helpers/delay-proxy.js';
import { startRedis } from '../setup/redis.js';

const TIMEOUT = 50;
/** Slack beyond a plain timer of TIMEOUT ms started at the same moment. */
const SLACK = 15;

// sliding-log: the local share (5 of 8) is exact wherever a minute boundary falls (a sliding-window
// counter's estimate drops across one and let a sixth through).
const rules = [{ name: 'r', key: () => 'k', algorithm: 'sliding-log' as const, limit: 10, window: '1m' as const }];

/**
 * Consumes until a decision comes from Redis (at most `tries`): on a busy machine a healthy call
 * can miss a 50 ms deadline, which is the failure policy working, not the outage under test. Give
 * it a limiter of its own (another prefix): what a missed call counts in the fallback stays there.
 */
async function onRedis(l: Limiter<unknown>, tries = 100): Promise<Decision> {
  let d = await l.consume({});
  for (let i = 1; i < tries && d.degraded !== undefined; i++) {
    await new Promise((r) => setTimeout(r, 20));
    d = await l.consume({});
  }
  return d;
}

/**
 * Runs one decision and measures it against a plain `setTimeout(TIMEOUT)` started at the
 * same moment: on a loaded machine timers fire late, and the store's deadline is a timer
 * too. `bound` is when the decision must have answered: that timer's actual delay + SLACK.
 */
async function timed(l: Limiter<unknown>): Promise<{ d: Decision; ms: number; bound: number; at: number }> {
  const t = performance.now();
  let timer = 0;
  const probe = new Promise<void>((resolve) =>
    setTimeout(() => {
      timer = performance.now() - t;
      resolve();
    }, TIMEOUT),
  );
  const d = await l.consume({});
  const at = performance.now();
  await probe;
  return { d, ms: at - t, bound: Math.max(TIMEOUT, timer) + SLACK, at };
}

async function client(port: number, offlineQueue: boolean): Promise<Redis> {
  const c = new Redis({ port, host: '127.0.0.1', enableOfflineQueue: offlineQueue, retryStrategy: () => 50, maxRetriesPerRequest: 1 });
  c.on('error', () => {}); // connection errors are expected here; the store reports them
  await new Promise((resolve) => c.once('ready', resolve));
  return c;
}

describe.each([
  ['on', true],
  ['off', false],
])('outage with the offline queue %s', (_label, offlineQueue) => {
  it("'local' keeps deciding within timeoutMs with per-instance limits, 'allow' passes, 'deny' says so, and all return to Redis", async () => {
    const server = await startRedis();
    const c = await client(server.port, offlineQueue);
    const breaker = { failures: 2, cooldownMs: 150 };
    const local = new RedisStore({ client: c, prefix: 'out:', timeoutMs: TIMEOUT, breaker, instances: 2 });
    const allow = new RedisStore({ client: c, prefix: 'out:', timeoutMs: TIMEOUT, breaker, onStoreError: 'allow' });
    const deny = new RedisStore({ client: c, prefix: 'out:', timeoutMs: TIMEOUT, breaker, onStoreError: 'deny' });
    const changes: BreakerEvent[] = [];
    local.on('breaker', (e: BreakerEvent) => changes.push(e));
    const errorEvents: unknown[] = [];
    local.on('error', (e) => errorEvents.push(e));
    const published: { channel: string; message: unknown }[] = [];
    const onError = (message: unknown) => published.push({ channel: 'error', message });
    const onBreaker = (message: unknown) => published.push({ channel: 'breaker', message });
    diagnosticsChannel.subscribe(REDIS_CHANNEL_NAMES.error, onError);
    diagnosticsChannel.subscribe(REDIS_CHANNEL_NAMES.breaker, onBreaker);
    const prefix = `out${offlineQueue ? 1 : 0}`;
    const lLocal = createLimiter({ rules, store: local, prefix });
    const lAllow = createLimiter({ rules, store: allow, prefix: `${prefix}a` });
    const lDeny = createLimiter({ rules, store: deny, prefix: `${prefix}d` });
    try {
      // On Redis before the kill (the library loaded, every breaker closed), through limiters of their own.
      for (const store of [local, allow, deny])
        expect((await onRedis(createLimiter({ rules, store, prefix: `${prefix}w` }))).degraded).toBeUndefined();

      await server.stop();

      // 'local': every decision within the deadline; the local share (10 / 2 instances) holds.
      const localRuns = [];
      for (let i = 0; i < 8; i++) localRuns.push(await timed(lLocal));
      for (const { d, ms, bound } of localRuns) {
        expect(d.degraded).toBe('local');
        expect(ms).toBeLessThanOrEqual(bound);
      }
      expect(localRuns.filter((r) => r.d.allowed).length).toBe(5);
      expect(local.breakerState).toBe('open');

      // 'allow' lets everything through, 'deny' refuses and says why (503 at the HTTP layer).
      for (let i = 0; i < 4; i++) {
        const a = await timed(lAllow);
        expect(a.d).toMatchObject({ allowed: true, degraded: 'allow' });
        expect(a.ms).toBeLessThanOrEqual(a.bound);
        const d = await timed(lDeny);
        expect(d.d).toMatchObject({ allowed: false, degraded: 'deny' });
        expect(d.d.retryAfterMs).toBeGreaterThan(0);
        expect(d.ms).toBeLessThanOrEqual(d.bound);
      }

      expect(errorEvents.length).toBeGreaterThanOrEqual(2);
      expect(published.some((p) => p.channel === 'error')).toBe(true);
      expect(published.some((p) => p.channel === 'breaker' && (p.message as BreakerEvent).to === 'open')).toBe(true);

      // Restart: the store goes back to Redis by itself (cool-down + reconnect + one probe).
      await server.start();
      let back: Decision | undefined;
      // Bounded by tries, not by time: a busy machine takes longer to reconnect.
      for (let tries = 0; tries < 150; tries++) {
        const { d, ms, bound } = await timed(lLocal);
        expect(ms).toBeLessThanOrEqual(bound);
        if (d.degraded === undefined) {
          back = d;
          break;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(back).toBeDefined();
      expect(local.breakerState).toBe('closed');
      expect(changes.map((e) => `${e.from}>${e.to}`)).toEqual(
        expect.arrayContaining(['closed>open', 'open>half-open', 'half-open>closed']),
      );
    } finally {
      diagnosticsChannel.unsubscribe(REDIS_CHANNEL_NAMES.error, onError);
      diagnosticsChannel.unsubscribe(REDIS_CHANNEL_NAMES.breaker, onBreaker);
      c.disconnect();
      await server.destroy();
    }
  });
});

describe('latency', () => {
  it('a Redis slowed past timeoutMs (DEBUG SLEEP) never makes a decision wait longer than timeoutMs', async () => {
    const server = await startRedis(['--enable-debug-command', 'local']);
    const c = await client(server.port, true);
    const blocker = await client(server.port, true);
    const store = new RedisStore({ client: c, prefix: 'slow:', timeoutMs: TIMEOUT, breaker: { failures: 3, cooldownMs: 100 } });
    const l = createLimiter({ rules, store, prefix: 'slow' });
    try {
      expect((await onRedis(l)).degraded).toBeUndefined();
      // Redis cannot answer before this: it gets the command after it is sent and sleeps 600 ms.
      const asleepUntil = performance.now() + 600;
      const sleeping = blocker.call('DEBUG', 'SLEEP', '0.6');
      await new Promise((r) => setTimeout(r, 10));
      // Concurrent and sequential decisions while Redis is stuck.
      const concurrent = await Promise.all(Array.from({ length: 20 }, () => timed(l)));
      const sequential = [];
      for (let i = 0; i < 5; i++) sequential.push(await timed(l));
      const all = [...concurrent, ...sequential];
      for (const { ms, bound } of all) expect(ms).toBeLessThanOrEqual(bound);
      // Answered while Redis slept: by the failure policy. Judged by when each was answered, not
      // by the count: on a busy machine Redis woke before the 25th and rightly answered the rest.
      const whileAsleep = all.filter((r) => r.at < asleepUntil);
      expect(whileAsleep.length).toBeGreaterThanOrEqual(concurrent.length);
      for (const { d } of whileAsleep) expect(d.degraded).toBe('local');
      await sleeping;
      // Redis answers again: back to Redis after the cool-down.
      expect((await onRedis(l)).degraded).toBeUndefined();
    } finally {
      c.disconnect();
      blocker.disconnect();
      await server.destroy();
    }
  });
});

describe('give-backs of decisions the failure policy made', () => {
  it.each([
    ['allow', 'nothing was counted'],
    ['local', 'they were counted in the local fallback'],
  ] as const)(
    "a refund or settle of a '%s' decision gives nothing to Redis: %s (it credited Redis once the breaker closed)",
    async (policy, _why) => {
      const server = await startRedis();
      const proxy = new DelayProxy(server.port);
      const port = await proxy.listen();
      const c = await client(port, true);
      const clock = new ManualClock(5_000_000);
      const store = new RedisStore({
        client: c,
        prefix: 'gb:',
        timeoutMs: TIMEOUT,
        breaker: { failures: 1, cooldownMs: 0 },
        onStoreError: policy,
      });
      const exact = new RedisStore({ client: c, prefix: 'gb:', timeoutMs: 10_000 });
      const fixed = [{ name: 'f', key: () => 'k', algorithm: 'fixed-window' as const, limit: 5, window: '1h' as const }];
      const l = createLimiter({ rules: fixed, store, clock });
      const plain = createLimiter({ rules: fixed, store: exact, clock });
      const probe = createLimiter({ rules: fixed.map((r) => ({ ...r, key: () => 'probe' })), store, clock });
      try {
        for (let i = 0; i < 5; i++) expect((await plain.consume({})).allowed).toBe(true);
        // Redis too slow: the breaker opens, and the policy decides the next requests.
        proxy.delayMs = 10 * TIMEOUT;
        expect((await l.consume({})).degraded).toBe(policy);
        const refunded = await l.consume({});
        const reserved = await l.reserve({}, { cost: 3 });
        expect(refunded).toMatchObject({ allowed: true, degraded: policy });
        expect(reserved.decision).toMatchObject({ allowed: true, degraded: policy });
        proxy.delayMs = 0;
        // Back on Redis (bounded by tries: the late call drains first).
        let back = false;
        for (let tries = 0; tries < 150 && !back; tries++) {
          back = (await probe.peek({})).degraded === undefined;
          if (!back) await new Promise((r) => setTimeout(r, 20));
        }
        expect(back).toBe(true);
        await l.refund({}, refunded);
        await reserved.settle(0);
        const after = await plain.get('f', 'k');
        expect(after.remaining).toBe(0);
        expect((await plain.consume({})).allowed).toBe(false);
      } finally {
        await store.close();
        await exact.close();
        c.disconnect();
        await proxy.close();
        await server.destroy();
      }
    },
  );
});
