/**
 * Tiers, limits per request, `update` and operations by key through the Express and Fastify
 * adapters on a RedisStore over a three-master Redis Cluster (issue 16, "Done when": the
 * adapters on both stores; the standalone-Redis and memory runs are the HTTP scenarios and
 * key-ops.test.ts). The app-level `ip` rule and the tier rules have keys in different slots,
 * so a decision spans slots: it must still be all or nothing (a tier refusal gives back what
 * the `ip` rule took). Real HTTP on loopback; the store's clock stands still (read once, so
 * within Redis TIME's second), so a test's decisions never straddle a window's end.
 */
import http from 'node:http';
import type { KeyOperations, Rule, Store } from '@tollgate/core';
import { ManualClock, user } from '@tollgate/core';
import { rateLimit as expressRateLimit } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { RedisStore } from '@tollgate/redis';
import express from 'express';
import Fastify from 'fastify';
import { Cluster } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RedisCluster, startCluster } from '../setup/redis.js';

interface Req {
  headers: Record<string, string | string[] | undefined>;
}
const header = (req: Req, name: string) => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};
const byUser = user((req: Req) => header(req, 'x-user'));
const base: Rule<Req>[] = [{ name: 'ip', limit: 100, window: '1m', algorithm: 'fixed-window' }];
const tiers: Record<string, Rule<Req>[]> = {
  free: [{ name: 'free', key: byUser, limit: 2, window: '1m', algorithm: 'fixed-window', group: 'plan', blockFor: '10m' }],
  pro: [{ name: 'pro', key: byUser, limit: 4, window: '1m', algorithm: 'fixed-window', group: 'plan' }],
  enterprise: [
    {
      name: 'enterprise',
      key: byUser,
      // A negotiated quota read per request (awaited): here from a header, as a stand-in.
      limit: async (req) => Number(header(req, 'x-quota')),
      window: '1m',
      algorithm: 'fixed-window',
      group: 'plan',
    },
  ],
};
const tier = async (req: Req) => header(req, 'x-plan') ?? 'free';
const routeRules: Rule<Req>[] = [{ name: 'upload', key: byUser, limit: 1, window: '1h', algorithm: 'token-bucket' }];

interface App {
  port: number;
  ops: KeyOperations & { update(rule: string, changes: object): void };
  close(): Promise<void>;
}

async function expressApp(store: Store): Promise<App> {
  const app = express();
  const limiter = expressRateLimit({ rules: base as Rule<express.Request>[], tiers: tiers as never, tier, store });
  app.use(limiter);
  app.post('/upload', limiter.route({ rules: routeRules as Rule<express.Request>[] }), (req, res) => {
    res.json({ rateLimit: req.rateLimit });
  });
  app.get('/', (req, res) => {
    res.json({ rateLimit: req.rateLimit });
  });
  app.use((err: { code?: string }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ code: err.code });
  });
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    ops: limiter,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function fastifyApp(store: Store): Promise<App> {
  const app = Fastify();
  await app.register(tollgate, { rules: base, tiers, tier, store });
  app.post('/upload', { config: { rateLimit: { rules: routeRules } } }, (req) => ({ rateLimit: req.rateLimit }));
  app.get('/', (req) => ({ rateLimit: req.rateLimit }));
  app.setErrorHandler((err: { code?: string }, _req, reply) => {
    reply.status(500).send({ code: err.code });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: (app.server.address() as { port: number }).port, ops: app.tollgate, close: () => app.close() };
}

let cluster: RedisCluster;
let client: Cluster;
let n = 0;
const failures: unknown[] = [];

beforeAll(async () => {
  cluster = await startCluster();
  client = new Cluster(cluster.startupNodes);
  await client.ping();
});

afterAll(async () => {
  expect(failures).toEqual([]);
  client?.disconnect();
  await cluster?.destroy();
});

interface Reply {
  status: number;
  policy: string | null;
  rateLimit: string | null;
  body: { rateLimit?: { rules: Array<{ name: string; limit: number; remaining: number }> }; code?: string; 'violated-policies'?: string[] };
}

describe.each([
  { name: 'Express', make: expressApp },
  { name: 'Fastify', make: fastifyApp },
])('$name on a Redis Cluster', ({ make }) => {
  let app: App;
  afterEach(async () => {
    await app?.close();
  });

  async function start(): Promise<void> {
    const store = new RedisStore({ client, prefix: `tc${++n}:`, timeoutMs: 3000, clock: new ManualClock(Date.now()) });
    store.on('error', (e) => failures.push(e));
    app = await make(store);
  }
  const go = async (headers: Record<string, string>, method = 'GET', path = '/'): Promise<Reply> => {
    const res = await fetch(`http://127.0.0.1:${app.port}${path}`, { method, headers });
    return {
      status: res.status,
      policy: res.headers.get('ratelimit-policy'),
      rateLimit: res.headers.get('ratelimit'),
      body: (await res.json()) as Reply['body'],
    };
  };
  const statuses = async (count: number, headers: Record<string, string>) => {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push((await go(headers)).status);
    return out;
  };
  const ipRemaining = (r: Reply) => Number(/"ip";r=(\d+)/.exec(r.rateLimit ?? '')?.[1]);

  it("the plan picks the tier; headers name the tier's rule and limit; a tier refusal across slots consumes nothing from ip", async () => {
    await start();
    const free = { 'x-user': 'alice' };
    const first = await go(free);
    expect(first.policy).toBe('"ip";q=100;w=60, "free";q=2;w=60');
    expect(await statuses(3, free)).toEqual([200, 429, 429]); // the third is refused and blocks alice
    const pro = { 'x-user': 'bob', 'x-plan': 'pro' };
    expect((await go(pro)).policy).toBe('"ip";q=100;w=60, "pro";q=4;w=60');
    expect(await statuses(4, pro)).toEqual([200, 200, 200, 429]);
    // Admitted: alice 2, bob 4; the four refusals gave their ip unit back.
    expect(ipRemaining(await go({ 'x-user': 'carol' }))).toBe(100 - 7);
    // An unknown plan is an error for the app, never a pass, and consumes nothing.
    const gold = await go({ 'x-user': 'dave', 'x-plan': 'gold' });
    expect(gold.status).toBe(500);
    expect(gold.body.code).toBe('TG_INVALID_CALLBACK_RESULT');
    expect(ipRemaining(await go({ 'x-user': 'carol' }))).toBe(100 - 8); // one more: carol's
  });

  it('a limit per request (async) is the one applied and reported; a bad value is an error, never an admission', async () => {
    await start();
    const e = (quota: string) => ({ 'x-user': 'erin', 'x-plan': 'enterprise', 'x-quota': quota });
    const r = await go(e('7'));
    expect(r.status).toBe(200);
    expect(r.policy).toBe('"ip";q=100;w=60, "enterprise";q=7;w=60');
    expect(r.body.rateLimit?.rules.find((x) => x.name === 'enterprise')).toMatchObject({ limit: 7, remaining: 6 });
    expect((await go(e('2'))).status).toBe(200);
    // Lowered below what was used (2): refused, remaining 0, and moving back up keeps the count.
    const lowered = await go(e('1'));
    expect(lowered.status).toBe(429);
    expect(lowered.body['violated-policies']).toEqual(['enterprise']);
    expect((await go(e('3'))).rateLimit).toMatch(/"enterprise";r=0;/);
    for (const bad of ['0', '1.5', 'lots']) {
      const refused = await go(e(bad));
      expect(refused.status).toBe(500);
      expect(refused.body.code).toBe('TG_INVALID_CALLBACK_RESULT');
    }
    // ip: erin's 3 admitted requests only (the refusals and errors consumed nothing).
    expect(ipRemaining(await go({ 'x-user': 'zed' }))).toBe(100 - 4);
  });

  it('route rules join the tier in one decision across slots; a route refusal gives back the others', async () => {
    await start();
    const pro = { 'x-user': 'frank', 'x-plan': 'pro' };
    const r = await go(pro, 'POST', '/upload');
    expect(r.status).toBe(200);
    expect(r.body.rateLimit?.rules.map((x) => x.name).sort()).toEqual(['ip', 'pro', 'upload']);
    const again = await go(pro, 'POST', '/upload');
    expect(again.status).toBe(429);
    expect(again.body['violated-policies']).toEqual(['upload']);
    const after = await go(pro);
    expect(after.rateLimit).toMatch(/"ip";r=98;.*"pro";r=2;/);
  });

  it('update raises a tier limit in place, keeping what was used; moving plan keeps the group count', async () => {
    await start();
    const pro = { 'x-user': 'gina', 'x-plan': 'pro' };
    expect(await statuses(5, pro)).toEqual([200, 200, 200, 200, 429]);
    app.ops.update('pro', { limit: 6 });
    const raised = await go(pro);
    expect(raised.status).toBe(200);
    expect(raised.policy).toBe('"ip";q=100;w=60, "pro";q=6;w=60');
    expect(raised.rateLimit).toMatch(/"pro";r=1;/);
    // An operation uses the rule as updated.
    expect(await app.ops.get('pro', 'gina')).toMatchObject({ limit: 6, remaining: 1 });
    // Back to free (limit 2): the 5 used stay used.
    expect((await go({ 'x-user': 'gina' })).status).toBe(429);
    expect(() => app.ops.update('pro', { limit: 0 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_LIMIT' }));
    expect(() => app.ops.update('platinum', { limit: 9 })).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_RULE' }));
    expect((await go(pro)).policy).toBe('"ip";q=100;w=60, "pro";q=6;w=60');
  });

  it('operations by key reach a tier rule on the Cluster: get shows the block, unblock lifts it, reset lets the client in', async () => {
    await start();
    const free = { 'x-user': 'hana' };
    expect(await statuses(3, free)).toEqual([200, 200, 429]);
    const state = await app.ops.get('free', 'hana');
    expect(state).toMatchObject({ rule: 'free', key: 'hana', limit: 2, remaining: 0, blocked: true, exists: true });
    // The group's state: the same block seen through another plan's rule.
    expect(await app.ops.get('pro', 'hana')).toMatchObject({ blocked: true });
    expect(await app.ops.unblock('free', 'hana')).toMatchObject({ blocked: false, remaining: 0 });
    expect((await go(free)).status).toBe(429); // still over the limit: the count is kept (and blocks again)
    await app.ops.reset('free', 'hana');
    const back = await go(free);
    expect(back.status).toBe(200);
    expect(back.rateLimit).toMatch(/"free";r=1;/);
    expect(await app.ops.penalize('free', 'hana', 5)).toMatchObject({ remaining: 0 });
    expect((await go(free)).status).toBe(429);
  });
});
