/**
 * Operations by key through the adapters (issue 16, item 4): an Express app, a Fastify app
 * and a node:http app, each with an app-level `ip` rule, a route-level `login` rule with
 * `blockFor`, and admin routes that read, unblock, reward and block a client by its
 * address (`ipKey`) through the adapter's own object (`limiter.get / unblock / ...`,
 * `app.tollgate.*`). On MemoryStore and on RedisStore (a redis-server of this file), on a
 * ManualClock; the clients connect from distinct loopback addresses.
 */
import http from 'node:http';
import { ipKey, type KeyOperations, ManualClock, MemoryStore, type Rule, type Store } from '@tollgate/core';
import { rateLimit as expressRateLimit } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { rateLimit as nodeRateLimit } from '@tollgate/node';
import { RedisStore } from '@tollgate/redis';
import express from 'express';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../setup/http.js';
import { type RedisServer, startRedis } from '../setup/redis.js';

const START = Date.UTC(2026, 0, 1);
const CLIENT = '127.0.0.2';
const OTHER = '127.0.0.3';
const ADMIN = '127.0.0.1';

const appRules: Rule[] = [{ name: 'ip', rate: '100/min' }];
const loginRules: Rule[] = [{ name: 'login', limit: 2, window: '15m', algorithm: 'fixed-window', blockFor: '1h' }];

interface App {
  port: number;
  close(): Promise<void>;
}

/** What the admin routes do with the adapter's operations: `/admin/<op>?ip=...&rule=...`. */
async function admin(ops: KeyOperations, url: URL): Promise<unknown> {
  const key = ipKey(url.searchParams.get('ip') ?? '');
  const rule = url.searchParams.get('rule') ?? 'login';
  switch (url.pathname) {
    case '/admin/get':
      return ops.get(rule, key);
    case '/admin/unblock':
      return ops.unblock(rule, key);
    case '/admin/reward':
      return ops.reward(rule, key, Number(url.searchParams.get('units')));
    case '/admin/block':
      return ops.block(rule, key, url.searchParams.get('for') as '1m');
    default:
      await ops.reset(rule, key);
      return { reset: true };
  }
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

const closeServer = (server: http.Server) => new Promise<void>((resolve) => server.close(() => resolve()));

async function expressApp(store: Store, clock: ManualClock): Promise<App> {
  const app = express();
  const limiter = expressRateLimit({ rules: appRules as Rule<express.Request>[], store, clock });
  app.use('/admin', (req, res, next) => {
    admin(limiter, new URL(req.originalUrl, 'http://x')).then((v) => res.json(v), next);
  });
  app.use(limiter);
  app.post('/login', limiter.route({ rules: loginRules as Rule<express.Request>[] }), (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/', (_req, res) => {
    res.json({ ok: true });
  });
  app.use((err: { code?: string }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ code: err.code });
  });
  const server = http.createServer(app);
  return { port: await listen(server), close: () => closeServer(server) };
}

async function fastifyApp(store: Store, clock: ManualClock): Promise<App> {
  const app = Fastify();
  await app.register(tollgate, { rules: appRules, store, clock });
  app.all('/admin/*', { config: { rateLimit: false } }, (req) => admin(app.tollgate, new URL(req.url, 'http://x')));
  app.post('/login', { config: { rateLimit: { rules: loginRules } } }, () => ({ ok: true }));
  app.get('/', () => ({ ok: true }));
  app.setErrorHandler((err: { code?: string }, _req, reply) => {
    reply.status(500).send({ code: err.code });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: (app.server.address() as { port: number }).port, close: () => app.close() };
}

async function nodeApp(store: Store, clock: ManualClock): Promise<App> {
  const limit = nodeRateLimit({ rules: appRules as never, store, clock });
  const login = limit.route({ rules: loginRules as never });
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const json = (status: number, v: unknown) => {
      res.statusCode = status;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(v));
    };
    if (url.pathname.startsWith('/admin/')) {
      admin(limit, url).then(
        (v) => json(200, v),
        (err: { code?: string }) => json(500, { code: err.code }),
      );
      return;
    }
    if (!(await limit(req, res))) return;
    if (url.pathname === '/login' && !(await login(req, res))) return;
    json(200, { ok: true });
  });
  return { port: await listen(server), close: () => closeServer(server) };
}

let redis: RedisServer;
let client: Redis;
let n = 0;

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis({ port: redis.port, host: '127.0.0.1' });
});

afterAll(async () => {
  client.disconnect();
  await redis.destroy();
});

const STORES = [
  { name: 'MemoryStore', make: (clock: ManualClock) => new MemoryStore({ clock }) },
  { name: 'RedisStore', make: (clock: ManualClock) => new RedisStore({ client, prefix: `kops${++n}:`, clock, timeoutMs: 2000 }) },
];
const APPS = [
  { name: 'Express', make: expressApp },
  { name: 'Fastify', make: fastifyApp },
  { name: 'node:http', make: nodeApp },
];

describe.each(APPS)('$name', ({ make }) => {
  describe.each(STORES)('$name', ({ make: makeStore }) => {
    let app: App;
    let store: Store;
    let clock: ManualClock;
    const go = (path: string, from = CLIENT, method = 'GET') => send(app.port, { path, from, method }).reply;

    afterEach(async () => {
      await app.close();
      await store.close();
    });

    it('an admin route reads a blocked client, unblocks it, rewards it, and blocks another rule', async () => {
      clock = new ManualClock(START);
      store = makeStore(clock);
      app = await make(store, clock);
      expect((await go('/login', CLIENT, 'POST')).status).toBe(200);
      expect((await go('/login', CLIENT, 'POST')).status).toBe(200);
      const refused = await go('/login', CLIENT, 'POST');
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('3600');

      const state = await go(`/admin/get?ip=${CLIENT}`, ADMIN);
      expect(state.body).toMatchObject({ rule: 'login', key: CLIENT, blocked: true, blockedUntil: START + 3_600_000, remaining: 0 });

      // Unblocked, the counter still refuses (until the 15-minute window ends), and that
      // refusal starts a new block, as blockFor does...
      const u = await go(`/admin/unblock?ip=${CLIENT}`, ADMIN);
      expect(u.body).toMatchObject({ blocked: false, retryAfterMs: 900_000 });
      const still = await go('/login', CLIENT, 'POST');
      expect(still.status).toBe(429);
      expect(still.headers['retry-after']).toBe('3600');
      // ...so an operator who lets one more attempt in unblocks and rewards.
      await go(`/admin/unblock?ip=${CLIENT}`, ADMIN);
      expect((await go(`/admin/reward?ip=${CLIENT}&units=1`, ADMIN)).body).toMatchObject({ remaining: 1 });
      expect((await go('/login', CLIENT, 'POST')).status).toBe(200);

      // A block on the app-level rule, which has no blockFor: every route refuses that client.
      const b = await go(`/admin/block?ip=${CLIENT}&rule=ip&for=10m`, ADMIN);
      expect(b.body).toMatchObject({ rule: 'ip', blocked: true, retryAfterMs: 600_000 });
      const blocked = await go('/', CLIENT);
      expect(blocked.status).toBe(429);
      expect(blocked.headers['retry-after']).toBe('600');
      expect((await go('/', OTHER)).status).toBe(200);

      // Reset forgets both rules' state for the key, one rule at a time.
      await go(`/admin/reset?ip=${CLIENT}&rule=ip`, ADMIN);
      await go(`/admin/reset?ip=${CLIENT}&rule=login`, ADMIN);
      expect((await go('/', CLIENT)).status).toBe(200);
      expect((await go('/login', CLIENT, 'POST')).status).toBe(200);
    });

    it('an unknown rule is a coded error to the app', async () => {
      clock = new ManualClock(START);
      store = makeStore(clock);
      app = await make(store, clock);
      const r = await go(`/admin/get?ip=${CLIENT}&rule=logn`, ADMIN);
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ code: 'TG_UNKNOWN_RULE' });
    });
  });
});

describe('route rules by name', () => {
  it('route rules of one name and kind share a state and are reachable; of different kinds the name is ambiguous', async () => {
    const clock = new ManualClock(START);
    const limiter = expressRateLimit({ rules: appRules as Rule<express.Request>[], clock });
    await expect(limiter.get('export', 'k')).rejects.toMatchObject({ code: 'TG_UNKNOWN_RULE' });
    limiter.route({ rules: [{ name: 'export', limit: 5, window: '1m', group: 'exports' }] });
    limiter.route({ rules: [{ name: 'export', limit: 9, window: '1m', group: 'exports' }] });
    expect((await limiter.penalize('export', 'k', 2)).remaining).toBe(3);
    limiter.route({ rules: [{ name: 'export', limit: 5, window: '1h', group: 'exports' }] });
    await expect(limiter.get('export', 'k')).rejects.toMatchObject({
      code: 'TG_UNKNOWN_RULE',
      fix: expect.stringContaining('different names'),
    });
    // The app-level rules stay reachable.
    expect((await limiter.get('ip', 'k')).remaining).toBe(100);
  });
});

describe('ipKey', () => {
  it("is the key ip() gives: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 folded to the rule's subnet", () => {
    expect(ipKey('203.0.113.7')).toBe('203.0.113.7');
    expect(ipKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(ipKey('2001:db8:1:2ff:aaaa::7')).toBe('2001:db8:1:200::/56');
    expect(ipKey('2001:DB8:1:2FF::7', { ipv6Subnet: 64 })).toBe('2001:db8:1:2ff::/64');
    expect(ipKey('2001:db8::7%eth0', { ipv6Subnet: false })).toBe('2001:db8::7');
  });

  it('rejects what is not an address and bad options, coded', () => {
    for (const bad of ['', 'localhost', '127.1', '999.0.0.1', 42]) {
      expect(() => ipKey(bad as string)).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    }
    expect(() => ipKey('1.2.3.4', { ipv6Subnet: 0 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => ipKey('1.2.3.4', { subnet: 64 } as never)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
  });

  it('an IPv6 client of a /56 is reached by any address of it (through ip() itself)', async () => {
    const clock = new ManualClock(START);
    const { createLimiter, ip } = await import('@tollgate/core');
    const l = createLimiter({ rules: [{ name: 'ip', rate: '5/min', key: ip() }], clock });
    const req = (addr: string) => ({ headers: {}, socket: { remoteAddress: addr } });
    await l.consume(req('2001:db8:1:2ff::1'));
    await l.block('ip', ipKey('2001:db8:1:2aa::9'), '1m');
    expect((await l.consume(req('2001:db8:1:200::5'))).rules[0]?.reason).toBe('blocked');
    expect((await l.consume(req('2001:db8:1:300::5'))).allowed).toBe(true);
  });
});
