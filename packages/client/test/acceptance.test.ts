/**
 * Issue 7 acceptance, against a real tollgate-protected server on loopback (Express with
 * @tollgate/express) whose limiter runs on the same virtual clock as the clients
 * (test/helpers). Nothing here waits on the
 * real clock for the durations involved: time jumps between timers.
 */
import { createFetch, type RetryEvent, TollgateClientError } from '@tollgate/client';
import type { AlgorithmName, Rate } from '@tollgate/core';
import { constant, type Rule } from '@tollgate/express';
import { afterEach, describe, expect, it } from 'vitest';
import { type Arrival, type LimitedServer, seeded, startLimitedServer } from './helpers/limited-server.js';
import { VirtualScheduler } from './helpers/virtual-scheduler.js';

const T0 = 1_700_000_040_000; // a multiple of 1 s, 3 s and 60 s: windows start here

let server: LimitedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Each client's arrivals at the server, in order. */
function byClient(log: Arrival[]): Map<string, Arrival[]> {
  const m = new Map<string, Arrival[]>();
  for (const a of log) {
    const list = m.get(a.client ?? '') ?? [];
    list.push(a);
    m.set(a.client ?? '', list);
  }
  return m;
}

/** The most arrivals inside any interval of `widthMs`. */
function busiest(times: number[], widthMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; j < t.length; j++) {
    while ((t[j] as number) - (t[i] as number) >= widthMs) i++;
    best = Math.max(best, j - i + 1);
  }
  return best;
}

describe('200 clients refused at the same instant', () => {
  /** Without Retry-After the server also leaves out RateLimit, so the client has nothing but its backoff. */
  const herd = async (jitter: 'full' | 'none', withRetryAfter: boolean) => {
    const sched = new VirtualScheduler(T0);
    const global: Rule = { name: 'global', key: constant('all'), limit: 1, window: '1s', algorithm: 'fixed-window' };
    server = await startLimitedServer({
      clock: sched.clock,
      rules: [global],
      ...(!withRetryAfter && { retryAfter: () => undefined, rateLimitHeaders: false }),
    });
    const { url } = server;
    await fetch(`${url}/drain`, { headers: { 'x-client': 'drain' } }); // uses the window's only unit
    const tracked = sched.track();
    const calls = Array.from({ length: 200 }, (_, i) =>
      createFetch({ fetch: tracked, retries: 1, jitter, random: seeded(i + 1), clock: sched.clock, sleep: sched.sleep })(`${url}/x`, {
        headers: { 'x-client': `c${i}` },
      }),
    );
    await sched.run();
    const responses = await Promise.all(calls);
    const clients = byClient(server.log);
    clients.delete('drain');
    const first = [...clients.values()].map((a) => (a[0] as Arrival).at);
    const retries = [...clients.values()].map((a) => (a[1] as Arrival).at);
    return { first, retries, responses };
  };

  it('with Retry-After: full jitter spreads the retries over the half second after it', async () => {
    const spread = await herd('full', true);
    expect(spread.first.every((t) => t === T0)).toBe(true); // refused together
    expect(spread.retries).toHaveLength(200);
    expect(Math.min(...spread.retries)).toBeGreaterThanOrEqual(T0 + 1000); // never before Retry-After
    expect(Math.max(...spread.retries)).toBeLessThanOrEqual(T0 + 1500); // Retry-After + random(0, 500), rounded up to the ms
    expect(new Set(spread.retries).size).toBeGreaterThan(150); // almost every retry at its own instant
    expect(busiest(spread.retries, 50)).toBeLessThanOrEqual(40); // uniform: ~20 per 50 ms, no wave
    expect(busiest(spread.retries, 1)).toBeLessThanOrEqual(4);
    // The refused retries were handed back as 429 (retries: 1); exactly one got the new unit.
    expect(spread.responses.filter((r) => r.status === 200)).toHaveLength(1);
  });

  it('with Retry-After, control without jitter: all 200 retries in one wave, at one instant', async () => {
    const control = await herd('none', true);
    expect(control.first.every((t) => t === T0)).toBe(true);
    expect(new Set(control.retries)).toEqual(new Set([T0 + 1000]));
    expect(busiest(control.retries, 1)).toBe(200);
    expect(busiest(control.retries, 50)).toBeGreaterThan(40); // the spread assertion above would fail
  });

  it('without Retry-After: full jitter spreads the retries over [0, base)', async () => {
    const spread = await herd('full', false);
    expect(Math.min(...spread.retries)).toBeGreaterThanOrEqual(T0);
    expect(Math.max(...spread.retries)).toBeLessThanOrEqual(T0 + 500);
    expect(new Set(spread.retries).size).toBeGreaterThan(150);
    expect(busiest(spread.retries, 50)).toBeLessThanOrEqual(40);
  });

  it('without Retry-After, control without jitter: every retry exactly at base', async () => {
    const control = await herd('none', false);
    expect(new Set(control.retries)).toEqual(new Set([T0 + 500]));
  });
});

describe('Retry-After is a floor', () => {
  const refusedOnce = async (retryAfter: ((now: number) => string) | undefined, sendDate = true, random = () => 0) => {
    const sched = new VirtualScheduler(T0);
    server = await startLimitedServer({
      clock: sched.clock,
      sendDate,
      // Retry-After alone: no RateLimit headers that could also carry the wait.
      rateLimitHeaders: false,
      rules: [{ name: 'slow', limit: 1, window: '3s', algorithm: 'fixed-window' }],
      ...(retryAfter && { retryAfter: (_d: unknown, now: number) => retryAfter(now) }),
    });
    const events: RetryEvent[] = [];
    const client = createFetch({
      fetch: sched.track(),
      random,
      clock: sched.clock,
      sleep: sched.sleep,
      onRetry: (e) => events.push(e),
    });
    // Another client uses the window's only unit, so this client's first request is refused.
    await fetch(`${server.url}/a`);
    const b = client(`${server.url}/b`);
    await sched.run();
    expect((await b).status).toBe(200);
    const [refused, retried] = server.log.filter((x) => x.path === '/b') as [Arrival, Arrival];
    expect(refused.status).toBe(429);
    expect(retried.status).toBe(200);
    return { gap: retried.at - refused.at, events };
  };

  it('Retry-After: 3 (delay-seconds): the retry comes 3 s later, never earlier, even when the jitter draws 0', async () => {
    const { gap, events } = await refusedOnce(undefined);
    expect(gap).toBe(3000);
    expect(events).toMatchObject([{ retry: 1, attempt: 2, reason: 'status', status: 429, serverWaitMs: 3000, waitMs: 3000 }]);
  });

  it('Retry-After as an HTTP-date 3 s ahead: same floor, measured against the server Date header', async () => {
    const { gap } = await refusedOnce((now) => new Date(now + 3000).toUTCString());
    expect(gap).toBe(3000);
  });

  it('HTTP-date without a Date header: measured against the client clock', async () => {
    const { gap } = await refusedOnce((now) => new Date(now + 3000).toUTCString(), false);
    expect(gap).toBe(3000);
  });

  it('with jitter drawn high, the retry still only comes later (3 s + up to base)', async () => {
    const { gap } = await refusedOnce(undefined, true, () => 0.999);
    expect(gap).toBeGreaterThanOrEqual(3000);
    expect(gap).toBeLessThanOrEqual(3500);
  });
});

describe('POST after a timeout', () => {
  /** A server that parks (never answers) the first request it gets and answers the rest. */
  const parkingServer = async (sched: VirtualScheduler) => {
    let parked = 0;
    sched.parked = () => parked;
    server = await startLimitedServer({
      clock: sched.clock,
      intercept: (req, _res, n) => {
        if (n > 0) return false;
        parked++;
        req.on('close', () => parked--);
        return true;
      },
    });
    return server;
  };

  it('without Idempotency-Key: not retried; the caller gets TGC_TIMEOUT and the server saw one request', async () => {
    const sched = new VirtualScheduler(T0);
    const { url, log } = await parkingServer(sched);
    const client = createFetch({ fetch: sched.track(), timeoutMs: 5000, clock: sched.clock, sleep: sched.sleep });
    const p = client(`${url}/orders`, { method: 'POST', body: '{"qty":1}' });
    const caught = p.catch((e: unknown) => e);
    await sched.run();
    const err = await caught;
    expect(err).toBeInstanceOf(TollgateClientError);
    expect((err as TollgateClientError).code).toBe('TGC_TIMEOUT');
    expect(sched.clock.now()).toBe(T0 + 5000);
    expect(log).toHaveLength(1);
  });

  it('with an Idempotency-Key header: retried, and the server sees the same key twice', async () => {
    const sched = new VirtualScheduler(T0);
    const { url, log } = await parkingServer(sched);
    const client = createFetch({ fetch: sched.track(), timeoutMs: 5000, clock: sched.clock, sleep: sched.sleep });
    const p = client(`${url}/orders`, { method: 'POST', body: '{"qty":1}', headers: { 'Idempotency-Key': 'order-42' } });
    await sched.run();
    expect((await p).status).toBe(200);
    expect(log.map((a) => a.idempotencyKey)).toEqual(['order-42', 'order-42']);
    expect(log[1]?.at).toBeGreaterThanOrEqual(T0 + 5000);
  });

  it('with idempotencyKey: true: a generated key, the same on both attempts', async () => {
    const sched = new VirtualScheduler(T0);
    const { url, log } = await parkingServer(sched);
    const client = createFetch({ fetch: sched.track(), timeoutMs: 5000, idempotencyKey: true, clock: sched.clock, sleep: sched.sleep });
    const p = client(`${url}/orders`, { method: 'POST', body: '{"qty":1}' });
    await sched.run();
    expect((await p).status).toBe(200);
    expect(log).toHaveLength(2);
    expect(log[0]?.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(log[1]?.idempotencyKey).toBe(log[0]?.idempotencyKey);
  });
});

describe('a batch of 500 against a 50/s server, self-paced at 50/s', () => {
  const batch = async (algorithm: AlgorithmName, pace: Rate | undefined) => {
    const sched = new VirtualScheduler(T0);
    server = await startLimitedServer({ clock: sched.clock, rules: [{ name: 'api', key: constant('batch'), rate: '50/s', algorithm }] });
    const client = createFetch({
      fetch: sched.track(),
      ...(pace !== undefined && { pace }),
      random: seeded(7),
      clock: sched.clock,
      sleep: sched.sleep,
    });
    const { url } = server;
    const calls = Array.from({ length: 500 }, (_, i) => client(`${url}/item/${i}`));
    await sched.run();
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    return {
      ok: statuses.filter((s) => s === 200).length,
      refusedSeen: server.log.filter((a) => a.status === 429).length,
      arrivals: server.log.length,
      elapsedMs: sched.clock.now() - T0,
    };
  };

  for (const algorithm of ['sliding-window', 'fixed-window', 'token-bucket', 'sliding-log'] as const) {
    it(`${algorithm} server: all 500 succeed, the server refuses none`, async () => {
      const r = await batch(algorithm, '50/s');
      expect(r).toMatchObject({ ok: 500, refusedSeen: 0, arrivals: 500 });
      expect(r.elapsedMs).toBeGreaterThanOrEqual(9980); // 500 at 50/s cannot take less than ~10 s
    });
  }

  it('control: the same batch unpaced is refused by the server', async () => {
    const r = await batch('sliding-window', undefined);
    expect(r.refusedSeen).toBeGreaterThan(100);
  });
});
