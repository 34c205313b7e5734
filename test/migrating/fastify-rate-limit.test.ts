/**
 * docs/migrating.md, @fastify/rate-limit: each recipe registers @fastify/rate-limit and
 * @tollgate/fastify on two Fastify apps, sends both the same requests with `app.inject`
 * on a faked `Date`, and compares status codes and the headers the recipe promises.
 * Where the guide says the two differ, the test shows how.
 */
import net from 'node:net';
import peerPlugin from '@fastify/rate-limit';
import { type Duration, header, MemoryStore, type Rule } from '@tollgate/core';
import tollgate, { type TollgateOptions } from '@tollgate/fastify';
import { RedisStore } from '@tollgate/redis';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { at } from './helpers.js';

const apps: FastifyInstance[] = [];

afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

interface Route {
  path: string;
  peer?: Record<string, unknown>;
  ours?: { rules: Rule<FastifyRequest>[] };
}

/** Two apps with the same routes: one with @fastify/rate-limit, one with tollgate. */
async function pair(peerOptions: Record<string, unknown>, ours: TollgateOptions, routes: Route[] = [{ path: '/' }]) {
  const peer = Fastify();
  await peer.register(peerPlugin, peerOptions);
  const mine = Fastify();
  await mine.register(tollgate, ours);
  for (const r of routes) {
    peer.get(r.path, r.peer ? { config: { rateLimit: r.peer } } : {}, async () => 'ok');
    mine.get(r.path, r.ours ? { config: { rateLimit: r.ours } } : {}, async () => 'ok');
  }
  apps.push(peer, mine);
  return [peer, mine] as const;
}

interface Step {
  t: number;
  path?: string;
  from?: string;
  headers?: Record<string, string>;
}

async function drive(
  apps: readonly FastifyInstance[],
  steps: Step[],
  read: (res: Awaited<ReturnType<FastifyInstance['inject']>>) => unknown,
): Promise<[unknown[], unknown[], ...unknown[][]]> {
  const out = apps.map(() => []) as unknown[][] as [unknown[], unknown[], ...unknown[][]];
  for (const s of steps) {
    at(s.t);
    for (const [i, a] of apps.entries()) {
      const res = await a.inject({ url: s.path ?? '/', remoteAddress: s.from ?? '127.0.0.1', headers: s.headers ?? {} });
      (out[i] as unknown[]).push(read(res));
    }
  }
  return out;
}

const status = (res: { statusCode: number }) => res.statusCode;
const fixed = (name: string, limit: number, window: Duration): Rule<FastifyRequest> => ({
  name,
  limit,
  window,
  algorithm: 'fixed-window',
  align: 'first-request',
});

describe('@fastify/rate-limit → @tollgate/fastify', () => {
  it("the plugin-level limit: max + timeWindow '1 minute' → a first-request fixed window of '1 minute', the same statuses", async () => {
    const [peer, mine] = await pair({ max: 3, timeWindow: '1 minute' }, { rules: [fixed('ip', 3, '1 minute')] });
    const seq = [0, 1000, 2000, 3000, 59_999, 60_000, 60_001, 60_002, 60_003].map((t) => ({ t }));
    const [a, b] = await drive([peer, mine], seq, (res) => [res.statusCode, res.headers['retry-after']]);
    expect(a.map((x) => (x as number[])[0])).toEqual([200, 200, 200, 429, 429, 200, 200, 200, 429]);
    expect(b).toEqual(a);
  });

  it('route config adds its rules to the plugin-level ones in tollgate, and replaces them in @fastify/rate-limit', async () => {
    const [peer, mine] = await pair({ max: 3, timeWindow: '1 minute' }, { rules: [fixed('ip', 3, '1 minute')] }, [
      { path: '/' },
      { path: '/login', peer: { max: 2, timeWindow: '15 minutes' }, ours: { rules: [fixed('login', 2, '15 minutes')] } },
    ]);
    const seq: Step[] = [
      { t: 0, path: '/login' },
      { t: 1, path: '/login' },
      { t: 2, path: '/login' },
      { t: 3, path: '/' },
      { t: 4, path: '/' },
      { t: 5, path: '/' },
    ];
    const [a, b] = await drive([peer, mine], seq, status);
    // Peer: /login counts apart from the global limit, so '/' still has 3.
    expect(a).toEqual([200, 200, 429, 200, 200, 200]);
    // tollgate: the two logins also counted against 'ip' (the refused one did not), so '/' has 1 left.
    expect(b).toEqual([200, 200, 429, 200, 429, 429]);
  });

  it("headers: x-ratelimit-limit/-remaining agree with headers: 'legacy'; x-ratelimit-reset is seconds from now in the peer, an epoch in tollgate", async () => {
    const [peer, mine] = await pair({ max: 2, timeWindow: 60_000 }, { rules: [fixed('ip', 2, '1m')], headers: 'legacy' });
    const [a, b] = await drive(
      [peer, mine],
      [0, 10_000, 20_000].map((t) => ({ t })),
      (res) => [res.statusCode, res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining']],
    );
    expect(b).toEqual(a);
    at(10_000);
    const [pr, mr] = await Promise.all([peer.inject('/'), mine.inject('/')]);
    expect(pr.headers['x-ratelimit-reset']).toBe('50');
    expect(mr.headers['x-ratelimit-reset']).toBe(String(Math.ceil((Date.now() + 50_000) / 1000)));
  });

  it("enableDraftSpec: true → headers: 'draft-6': the same ratelimit-limit, -remaining, -reset and retry-after", async () => {
    const [peer, mine] = await pair(
      { max: 2, timeWindow: 60_000, enableDraftSpec: true },
      { rules: [fixed('ip', 2, '1m')], headers: 'draft-6' },
    );
    const [a, b] = await drive(
      [peer, mine],
      [0, 10_000, 20_000, 30_500].map((t) => ({ t })),
      (res) => [
        res.statusCode,
        res.headers['ratelimit-limit'],
        res.headers['ratelimit-remaining'],
        res.headers['ratelimit-reset'],
        res.headers['retry-after'],
      ],
    );
    expect(b).toEqual(a);
  });

  it('continueExceeding: the peer restarts the window at every refused request; sliding-log + countRejected pushes recovery back less, a fixed window with countRejected not at all', async () => {
    const seq = [0, 1, 9000, 10_000, 19_000, 29_000].map((t) => ({ t }));
    const peer = Fastify();
    await peer.register(peerPlugin, { max: 2, timeWindow: 10_000, continueExceeding: true });
    peer.get('/', async () => 'ok');
    const variants = await Promise.all(
      (['sliding-log', 'fixed-window'] as const).map(async (algorithm) => {
        const a = Fastify();
        await a.register(tollgate, {
          rules: [
            {
              name: 'ip',
              limit: 2,
              window: '10s',
              algorithm,
              countRejected: true,
              ...(algorithm === 'fixed-window' ? { align: 'first-request' } : {}),
            },
          ],
        });
        a.get('/', async () => 'ok');
        return a;
      }),
    );
    apps.push(peer, ...variants);
    const [p, log, fw] = await drive([peer, ...variants], seq, status);
    // Peer: refused at 9 s, 10 s and 19 s, each restarting a 10 s window; admitted 10 s after the last, at 29 s.
    expect(p).toEqual([200, 200, 429, 429, 429, 200]);
    // sliding-log: the refusals at 9 s and 10 s count for 10 s each, so 10 s is refused too; by 19 s only one is left.
    expect(log).toEqual([200, 200, 429, 429, 200, 200]);
    // fixed-window: the window opened at 0 ends at 10 s whatever was refused in it.
    expect(fw).toEqual([200, 200, 429, 200, 200, 200]);
  });

  it('IPv6: @fastify/rate-limit folds clients by /64 and tollgate by /56; ipv6Subnet: 64 gives the peer grouping', async () => {
    const seq: Step[] = [
      { t: 0, from: '2001:db8:0:1::1' },
      { t: 1, from: '2001:db8:0:1::2' },
      { t: 2, from: '2001:db8:0:2::1' },
    ];
    const [peer, mine] = await pair({ max: 1, timeWindow: 60_000 }, { rules: [fixed('ip', 1, '1m')] });
    const [a, b] = await drive([peer, mine], seq, status);
    expect(a).toEqual([200, 429, 200]);
    expect(b).toEqual([200, 429, 429]);
    const [peer64, mine64] = await pair({ max: 1, timeWindow: 60_000 }, { rules: [fixed('ip', 1, '1m')], ipv6Subnet: 64 });
    const [c, d] = await drive([peer64, mine64], seq, status);
    expect(d).toEqual(c);
  });

  it('keyGenerator → key and allowList → skip: the same clients counted and let through (an allowList array is matched against the key)', async () => {
    const allowed = new Set(['vip']);
    const [peer, mine] = await pair(
      { max: 1, timeWindow: 60_000, keyGenerator: (req: FastifyRequest) => String(req.headers['x-user']), allowList: ['vip'] },
      {
        rules: [{ ...fixed('user', 1, '1m'), key: header('x-user') }],
        skip: (req) => allowed.has(String(req.headers['x-user'])),
      },
    );
    const seq: Step[] = [
      { t: 0, headers: { 'x-user': 'a' } },
      { t: 1, headers: { 'x-user': 'a' } },
      { t: 2, headers: { 'x-user': 'b' } },
      { t: 3, headers: { 'x-user': 'vip' } },
      { t: 4, headers: { 'x-user': 'vip' } },
    ];
    const [a, b] = await drive([peer, mine], seq, status);
    expect(a).toEqual([200, 429, 200, 200, 200]);
    expect(b).toEqual(a);
  });

  it("skipOnError has no effect with a RedisStore: the store's own onStoreError decides what a Redis outage does", async () => {
    const port = await closedPort();
    const dead = () =>
      new Redis({ port, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    const clients = [dead(), dead(), dead(), dead()];
    const stores: RedisStore[] = [];
    try {
      const peerOf = async (skipOnError: boolean) => {
        const a = Fastify();
        await a.register(peerPlugin, { max: 1, timeWindow: 60_000, redis: clients[skipOnError ? 0 : 1], skipOnError });
        a.get('/', async () => 'ok');
        apps.push(a);
        return a;
      };
      const oursOf = async (storePolicy: 'allow' | 'deny', adapterPolicy: 'allow' | 'error') => {
        const a = Fastify();
        const store = new RedisStore({
          client: clients[storePolicy === 'allow' ? 2 : 3] as Redis,
          onStoreError: storePolicy,
          timeoutMs: 200,
        });
        stores.push(store);
        await a.register(tollgate, { rules: [fixed('ip', 1, '1m')], store, onStoreError: adapterPolicy });
        a.get('/', async () => 'ok');
        apps.push(a);
        return a;
      };
      expect((await (await peerOf(true)).inject('/')).statusCode).toBe(200);
      expect((await (await peerOf(false)).inject('/')).statusCode).toBe(500);
      // The adapter's onStoreError ('error' would be a 500) never sees the outage: the store answered.
      expect((await (await oursOf('allow', 'error')).inject('/')).statusCode).toBe(200);
      expect((await (await oursOf('deny', 'allow')).inject('/')).statusCode).toBe(503);
      // The adapter's policy is for stores that throw, such as a MemoryStore after close().
      const closed = new MemoryStore();
      await closed.close();
      const a = Fastify();
      await a.register(tollgate, { rules: [fixed('ip', 1, '1m')], store: closed, onStoreError: 'error' });
      a.get('/', async () => 'ok');
      apps.push(a);
      expect((await a.inject('/')).statusCode).toBe(500);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
      for (const c of clients) c.disconnect();
    }
  });
});

/** A loopback port nothing listens on (bound, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
