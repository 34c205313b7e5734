/**
 * @tollgate/otel against real Express and Fastify apps, read with the OpenTelemetry SDK's
 * in-memory exporter: every metric is driven by real requests through the adapters (and a
 * real redis-server killed mid-run for the store metrics).
 */
import type { AddressInfo } from 'node:net';
import { CHANNEL_NAMES, ManualClock, type Store, TollgateError } from '@tollgate/core';
import { concurrency, rateLimit, shed } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { errorType, METRIC_NAMES, REDIS_CHANNELS, type TollgateMetrics, tollgateMetrics } from '@tollgate/otel';
import { REDIS_CHANNEL_NAMES, RedisStore } from '@tollgate/redis';
import express from 'express';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { startRedis } from '../../../test/setup/redis.js';
import { type TestMeter, testMeter } from './helpers.js';

let meter: TestMeter | undefined;
let recorder: TollgateMetrics | undefined;

function record(options: Parameters<typeof tollgateMetrics>[0] = {}): TestMeter {
  meter = testMeter();
  recorder = tollgateMetrics({ meterProvider: meter.meterProvider, ...options });
  return meter;
}

afterEach(async () => {
  recorder?.stop();
  recorder = undefined;
  await meter?.shutdown();
  meter = undefined;
});

/** ip: 3 per minute, enforced; shadow: 1 per minute, dry-run (it only says what it would refuse). */
const rules = [
  { name: 'ip', limit: 3, window: '1m' as const },
  { name: 'shadow', limit: 1, window: '1m' as const, dryRun: true },
];

/** A clock that stands still: a run's requests fall in one window wherever a minute ends (its counts are exact). */
const still = () => new ManualClock(0);

const R = METRIC_NAMES.requests;
const D = METRIC_NAMES.decisions;

describe('tollgate.requests and tollgate.decisions', () => {
  it('count five requests through Express by request outcome and by each policy’s own verdict', async () => {
    const m = record();
    const app = express();
    app.use(rateLimit({ rules, name: 'api', clock: still() }));
    app.get('/', (_req, res) => res.send('ok'));
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await request(app).get('/')).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);

    const c = await m.collect();
    const api = { 'tollgate.limiter': 'api' };
    expect(c.value(R, { ...api, 'tollgate.outcome': 'admitted' })).toBe(1);
    expect(c.value(R, { ...api, 'tollgate.outcome': 'dry_run_refused' })).toBe(2);
    expect(c.value(R, { ...api, 'tollgate.outcome': 'refused' })).toBe(2);
    expect(c.value(D, { ...api, 'tollgate.policy': 'ip', 'tollgate.outcome': 'admitted' })).toBe(3);
    expect(c.value(D, { ...api, 'tollgate.policy': 'ip', 'tollgate.outcome': 'refused' })).toBe(2);
    expect(c.value(D, { ...api, 'tollgate.policy': 'shadow', 'tollgate.outcome': 'admitted' })).toBe(1);
    expect(c.value(D, { ...api, 'tollgate.policy': 'shadow', 'tollgate.outcome': 'dry_run_refused' })).toBe(4);
    // One latency per decision, in seconds, and well under a second on the memory store.
    const [latency] = c.points(METRIC_NAMES.duration);
    expect(latency?.attributes).toEqual(api);
    const h = latency?.value as { count: number; max?: number };
    expect(h.count).toBe(5);
    expect(h.max).toBeGreaterThan(0);
    expect(h.max).toBeLessThan(1);
  });

  it('count a leaky-bucket queue’s delays, and a dry-run limiter’s would-be refusals, through Fastify', async () => {
    const m = record();
    const app = Fastify();
    await app.register(async (scoped) => {
      await scoped.register(tollgate, {
        name: 'queue',
        clock: new ManualClock(0), // the four arrive at one instant
        rules: [{ name: 'shaper', algorithm: 'leaky-bucket', mode: 'queue', rate: '1000/s', queue: 2 }],
      });
      scoped.get('/', async () => 'ok');
    });
    await app.register(async (scoped) => {
      await scoped.register(tollgate, { name: 'trial', dryRun: true, rules: [{ name: 'strict', limit: 1, window: '1m' }], clock: still() });
      scoped.get('/trial', async () => 'ok');
    });
    await app.ready();
    try {
      const burst = await Promise.all([0, 1, 2, 3].map(() => app.inject({ method: 'GET', url: '/' })));
      expect(burst.map((r) => r.statusCode).sort()).toEqual([200, 200, 429, 429]);
      for (let i = 0; i < 3; i++) expect((await app.inject({ method: 'GET', url: '/trial' })).statusCode).toBe(200);

      const c = await m.collect();
      expect(c.value(R, { 'tollgate.limiter': 'queue', 'tollgate.outcome': 'delayed' })).toBe(2);
      expect(c.value(R, { 'tollgate.limiter': 'queue', 'tollgate.outcome': 'refused' })).toBe(2);
      expect(c.value(D, { 'tollgate.limiter': 'queue', 'tollgate.policy': 'shaper', 'tollgate.outcome': 'delayed' })).toBe(2);
      expect(c.value(R, { 'tollgate.limiter': 'trial', 'tollgate.outcome': 'admitted' })).toBe(1);
      expect(c.value(R, { 'tollgate.limiter': 'trial', 'tollgate.outcome': 'dry_run_refused' })).toBe(2);
      expect(c.value(D, { 'tollgate.policy': 'strict', 'tollgate.outcome': 'dry_run_refused' })).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('carry no client key unless asked for, and then at most `limit` distinct values (the rest are "other")', async () => {
    const plain = record();
    const app = express();
    app.use(rateLimit({ rules: [{ name: 'ip', limit: 100, window: '1m' }] }));
    app.get('/', (_req, res) => res.send('ok'));
    await request(app).get('/').set('x-tenant', 'acme');
    const keys = (await plain.collect())
      .points(R)
      .concat((await plain.collect()).points(D))
      .flatMap((p) => Object.keys(p.attributes));
    expect(new Set(keys)).toEqual(new Set(['tollgate.limiter', 'tollgate.outcome', 'tollgate.policy']));
    recorder?.stop();
    await plain.shutdown();

    const m = record({ key: { name: 'tenant', get: (req) => (req as express.Request).get('x-tenant'), limit: 2 } });
    for (const t of ['a', 'b', 'c', 'd', 'a']) await request(app).get('/').set('x-tenant', t);
    await request(app).get('/'); // no tenant: no label
    const c = await m.collect();
    const tenants = c.points(R).map((p) => p.attributes.tenant);
    expect(tenants.sort()).toEqual(['a', 'b', 'other', undefined].sort());
    expect(c.value(R, { tenant: 'a' })).toBe(2);
    expect(c.value(R, { tenant: 'other' })).toBe(2);
    expect(c.value(D, { tenant: 'other', 'tollgate.policy': 'ip' })).toBe(2);
  });

  it('a label function that throws or returns anything but a string records no label and never fails the request', async () => {
    const answers: unknown[] = [
      () => {
        throw new Error('label bug');
      },
      () => Promise.resolve('acme'),
      () => ({
        toString() {
          throw new Error('hostile');
        },
      }),
      () => 42,
      () => 'x'.repeat(500),
    ];
    let k = 0;
    const m = record({ key: { name: 'tenant', get: () => (answers[k++] as () => unknown)() as string } });
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const app = express();
      app.use(rateLimit({ rules: [{ name: 'ip', limit: 100, window: '1m' }], name: 'labels' }));
      app.get('/', (_req, res) => res.send('ok'));
      for (let i = 0; i < answers.length; i++) expect((await request(app).get('/')).status).toBe(200);
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(uncaught).toEqual([]);
    const c = await m.collect();
    expect(c.value(R, { 'tollgate.limiter': 'labels' })).toBe(5);
    const labels = c.points(R).map((p) => p.attributes.tenant);
    expect(labels.sort()).toEqual(['42', 'x'.repeat(128), undefined].sort());
    expect(c.value(R, { 'tollgate.limiter': 'labels', tenant: '42' })).toBe(1);
  });

  it('stop() unsubscribes: later decisions are not recorded', async () => {
    const m = record();
    const app = express();
    app.use(rateLimit({ rules, name: 'gone' }));
    app.get('/', (_req, res) => res.send('ok'));
    await request(app).get('/');
    recorder?.stop();
    recorder?.stop();
    await request(app).get('/');
    const c = await m.collect();
    expect(c.value(R, { 'tollgate.limiter': 'gone' })).toBe(1);
  });
});

describe('in-flight gauges', () => {
  it('tollgate.concurrency.slots and tollgate.shed.in_flight follow requests in flight and go back to 0', async () => {
    const m = record();
    const app = express();
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let arrived = 0;
    app.use(shed({ maxInFlight: 10 }));
    app.use(concurrency({ name: 'workers', global: 2 }));
    app.get('/', async (_req, res) => {
      arrived++;
      await gate;
      res.send('ok');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      const held = [fetch(url), fetch(url)];
      while (arrived < 2) await new Promise((r) => setTimeout(r, 5));
      const third = await fetch(url);
      expect(third.status).toBe(503); // the global slots are taken
      let c = await m.collect();
      expect(c.value(METRIC_NAMES.concurrencySlots, { 'tollgate.limiter': 'workers' })).toBe(2);
      expect(c.value(METRIC_NAMES.shedInFlight, { 'tollgate.limiter': 'shed' })).toBe(2);
      expect(c.value(R, { 'tollgate.limiter': 'workers', 'tollgate.outcome': 'refused' })).toBe(1);
      expect(c.value(D, { 'tollgate.limiter': 'workers', 'tollgate.policy': 'workers-global', 'tollgate.outcome': 'refused' })).toBe(1);
      release();
      for (const r of await Promise.all(held)) expect(r.status).toBe(200);
      // Slots go back when the response is over.
      const until = Date.now() + 2000;
      do {
        c = await m.collect();
      } while (c.value(METRIC_NAMES.concurrencySlots) !== 0 && Date.now() < until);
      expect(c.value(METRIC_NAMES.concurrencySlots, { 'tollgate.limiter': 'workers' })).toBe(0);
      expect(c.value(METRIC_NAMES.shedInFlight, { 'tollgate.limiter': 'shed' })).toBe(0);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('store failures', () => {
  it('a failing store: tollgate.store.errors by action and error type', async () => {
    const m = record();
    const broken: Store = {
      consume: () => Promise.reject(Object.assign(new Error('boom'), { code: 'ECONNRESET' })),
      peek: () => Promise.reject(new Error('boom')),
      refund: async () => {},
      reset: async () => {},
      close: async () => {},
    };
    const app = express();
    app.use(rateLimit({ rules, store: broken, onStoreError: 'allow', name: 'open' }));
    app.get('/', (_req, res) => res.send('ok'));
    expect((await request(app).get('/')).status).toBe(200);
    const c = await m.collect();
    expect(c.value(METRIC_NAMES.storeErrors, { 'tollgate.limiter': 'open', 'tollgate.action': 'allow', 'error.type': 'ECONNRESET' })).toBe(
      1,
    );
  });

  it('Redis killed: degraded decisions by cause, Redis errors by type, and the breaker state', async () => {
    const m = record();
    const server = await startRedis();
    const client = new Redis({
      port: server.port,
      host: '127.0.0.1',
      enableOfflineQueue: false,
      retryStrategy: () => 50,
      maxRetriesPerRequest: 1,
    });
    client.on('error', () => {});
    await new Promise((r) => client.once('ready', r));
    // A killed Redis fails calls at once (no offline queue); a 50 ms deadline can also fail the first,
    // healthy call (it loads the function library) on a busy machine, which puts every count one off.
    const store = new RedisStore({ client, prefix: 'otel', timeoutMs: 5000, breaker: { failures: 2, cooldownMs: 60_000 } });
    const app = Fastify();
    await app.register(tollgate, { name: 'redis', store, rules: [{ name: 'ip', limit: 100, window: '1m' }] });
    app.get('/', async () => 'ok');
    try {
      expect((await app.inject({ url: '/' })).statusCode).toBe(200);
      await server.stop();
      for (let i = 0; i < 4; i++) expect((await app.inject({ url: '/' })).statusCode).toBe(200);
      const c = await m.collect();
      expect(c.value(METRIC_NAMES.degraded, { 'tollgate.limiter': 'redis', 'tollgate.cause': 'local' })).toBe(4);
      expect(
        c.value(METRIC_NAMES.redisErrors, { 'tollgate.store': 'otel', 'tollgate.operation': 'consume', 'tollgate.fallback': 'local' }),
      ).toBe(2);
      expect(c.value(METRIC_NAMES.breakerState, { 'tollgate.store': 'otel', 'tollgate.state': 'open' })).toBe(1);
      expect(c.value(METRIC_NAMES.breakerState, { 'tollgate.store': 'otel', 'tollgate.state': 'closed' })).toBe(0);
      expect(c.value(R, { 'tollgate.limiter': 'redis', 'tollgate.outcome': 'admitted' })).toBe(5);
    } finally {
      await app.close();
      await store.close();
      client.disconnect();
      await server.destroy();
    }
  });
});

describe('setup', () => {
  it('errorType is bounded: a code, else a class name, never message text, and never throws', () => {
    expect(errorType(new TollgateError('TG_STORE_TIMEOUT', 'Redis did not answer'))).toBe('TG_STORE_TIMEOUT');
    expect(errorType(new TypeError('bad key 10.0.0.1'))).toBe('TypeError');
    expect(errorType(Object.assign(new Error('x'), { code: 'a b{c}'.repeat(20) }))).toMatch(/^[A-Za-z0-9_.:-]{64}$/);
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('trap');
        },
      },
    );
    expect(errorType(hostile)).toBe('Error');
    expect(errorType('a string')).toBe('string');
    expect(errorType(undefined)).toBe('undefined');
  });

  it('the Redis channel names are the Redis store’s', () => {
    // The ones the metrics listen to (the store has others, e.g. its connect-time warnings).
    expect(REDIS_CHANNEL_NAMES).toMatchObject(REDIS_CHANNELS);
    expect(CHANNEL_NAMES.inFlight).toBe('tollgate:in-flight');
  });

  it('bad options are coded errors at construction', () => {
    const bad: unknown[] = [
      'yes',
      { meterProvider: {} },
      { key: (req: unknown) => req },
      { key: { get: () => 'x', limit: 0 } },
      { key: { get: () => 'x', name: 'not a name' } },
      { key: { get: () => 'x', name: 'tollgate.policy' } },
      { keyAttribute: true },
    ];
    for (const options of bad) {
      expect(() => tollgateMetrics(options as never)).toThrow(TollgateError);
    }
    expect(() => tollgateMetrics({ keyAttribute: true } as never)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
  });

  it('with no meter provider installed it records into the API’s no-ops without failing a request', async () => {
    recorder = tollgateMetrics();
    const app = express();
    app.use(rateLimit({ rules, clock: still() }));
    app.get('/', (_req, res) => res.send('ok'));
    for (let i = 0; i < 5; i++) await request(app).get('/');
    expect((await request(app).get('/')).status).toBe(429);
  });
});
