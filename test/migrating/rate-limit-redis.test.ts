/**
 * docs/migrating.md, rate-limit-redis: express-rate-limit with rate-limit-redis's store
 * and @tollgate/express with @tollgate/redis's RedisStore, each as two app instances
 * sharing one real Redis (started by the test setup), driven with the same requests
 * alternating between the instances. Redis keeps real time, so the sequence stays well
 * inside one window and compares counts, statuses and headers.
 */
import { rateLimit } from '@tollgate/express';
import { RedisStore } from '@tollgate/redis';
import express, { type RequestHandler } from 'express';
import { rateLimit as erlRateLimit } from 'express-rate-limit';
import { Redis } from 'ioredis';
import { RedisStore as PeerRedisStore, type RedisReply } from 'rate-limit-redis';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { items, pick } from './helpers.js';

let server: RedisServer;
let client: Redis;
const stores: RedisStore[] = [];
/** A tollgate RedisStore on the shared client, closed after the suite. */
const storeOf = (prefix: string) => {
  const store = new RedisStore({ client, prefix });
  stores.push(store);
  return store;
};

beforeAll(async () => {
  server = await startRedis();
  client = new Redis({ port: server.port, lazyConnect: true });
  await client.connect();
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  client.disconnect();
  await server.stop();
});

function app(limiter: RequestHandler): express.Express {
  const a = express();
  a.use(limiter);
  a.get('/', (_req, res) => {
    res.send('ok');
  });
  return a;
}

describe('rate-limit-redis → RedisStore from @tollgate/redis', () => {
  it('two instances share one count: the same statuses and draft-7 figures, with the window opened by the first request', async () => {
    const peerInstance = () =>
      app(
        erlRateLimit({
          windowMs: 60_000,
          limit: 3,
          standardHeaders: 'draft-7',
          legacyHeaders: false,
          store: new PeerRedisStore({
            sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as Promise<RedisReply>,
            prefix: 'peer:',
          }),
        }),
      );
    const ourInstance = () =>
      app(
        rateLimit({
          rules: [{ name: 'ip', limit: 3, window: '1m', algorithm: 'fixed-window', align: 'first-request' }],
          store: storeOf('ours:'),
          headers: 'draft-7',
        }),
      );
    const run = async (instances: express.Express[]) => {
      const out: { status: number; remaining: string; reset: number }[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await request(instances[i % 2] as express.Express).get('/');
        const figures = Object.fromEntries(
          String(res.headers.ratelimit)
            .split(/,\s*/)
            .map((kv) => kv.split('=')),
        );
        out.push({ status: res.status, remaining: figures.remaining, reset: Number(figures.reset) });
      }
      return out;
    };
    const a = await run([peerInstance(), peerInstance()]);
    const b = await run([ourInstance(), ourInstance()]);
    expect(a.map((x) => x.status)).toEqual([200, 200, 200, 429, 429, 429]);
    expect(b.map((x) => [x.status, x.remaining])).toEqual(a.map((x) => [x.status, x.remaining]));
    // Both count down from the first request's 60 s; read a moment apart, they may differ by a second.
    for (const [i, x] of b.entries()) expect(Math.abs(x.reset - (a[i] as { reset: number }).reset), `reset ${i}`).toBeLessThanOrEqual(1);
    expect(b[0]?.reset).toBeGreaterThanOrEqual(59);
  });

  it("prefix → prefix: each library's keys stay under its own namespace", async () => {
    const ours = app(rateLimit({ rules: [{ name: 'ip', limit: 3, window: '1m' }], store: storeOf('mine:'), prefix: 'api' }));
    const res = await request(ours).get('/');
    expect(res.status).toBe(200);
    expect(pick(items(res.headers['ratelimit-policy']), ['q', 'w'])).toEqual([{ name: 'ip', params: { q: '3', w: '60' } }]);
    const keys = await client.keys('mine:*');
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => k.startsWith('mine:'))).toBe(true);
  });
});
