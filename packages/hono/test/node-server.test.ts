/**
 * @tollgate/hono on a real server (@hono/node-server), the client address from Node's
 * `getConnInfo`: the "done when".
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { ManualClock, MemoryStore, rateLimit } from '@tollgate/hono';
import { Hono } from 'hono';
import { afterAll, beforeAll, expect, it } from 'vitest';

let server: Server;
let base: string;
const store = new MemoryStore();

beforeAll(async () => {
  const app = new Hono();
  app.use(
    rateLimit({
      rules: [
        { name: 'burst', limit: 3, window: '1m' },
        { name: 'hourly', limit: 100, window: '1h' },
      ],
      store,
      // A clock that stands still: the four requests fall in one window wherever a minute ends.
      clock: new ManualClock(0),
      connInfo: getConnInfo,
    }),
  );
  app.get('/', (c) => c.json({ rules: c.get('rateLimit')?.rules.length }));
  server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await store.close();
});

it("answers a client's 4th request with 429, Retry-After, RateLimit and a RateLimit-Policy naming every rule", async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${base}/`);
    statuses.push(r.status);
    await r.arrayBuffer();
  }
  const fourth = await fetch(`${base}/`);
  expect(statuses).toEqual([200, 200, 200]);
  expect(fourth.status).toBe(429);
  expect(Number(fourth.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(fourth.headers.get('ratelimit')).toMatch(/^"burst";r=0;t=\d+, "hourly";r=97;t=\d+$/);
  expect(fourth.headers.get('ratelimit-policy')).toBe('"burst";q=3;w=60, "hourly";q=100;w=3600');
  expect(fourth.headers.get('content-type')).toBe('application/problem+json');
  expect(await fourth.json()).toMatchObject({ status: 429, title: expect.any(String) });
});
