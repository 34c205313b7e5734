/**
 * `app.tollgate.update`: the decorator the plugin adds, shared by every registration of
 * the instance and of its child scopes; route rules and tiers included.
 */
import tollgate, { ManualClock, MemoryStore } from '@tollgate/fastify';
import Fastify from 'fastify';
import { afterEach, expect, it } from 'vitest';

const apps: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  while (apps.length > 0) await apps.pop()?.close();
});

const fw = { window: '1m', algorithm: 'fixed-window' } as const;

it('reaches plugin-level, route and tier rules of every registration, and names the unknown', async () => {
  const clock = new ManualClock(0);
  const app = Fastify();
  apps.push(app);
  await app.register(tollgate, {
    rules: [{ name: 'ip', limit: 1, ...fw }],
    tiers: { free: [{ name: 'free', limit: 1, ...fw }] },
    tier: () => 'free',
    store: new MemoryStore({ clock }),
    clock,
  });
  app.get('/', async () => 'ok');
  app.post('/upload', { config: { rateLimit: { rules: [{ name: 'upload', limit: 1, ...fw }] } } }, async () => 'up');
  await app.register(async (child) => {
    await child.register(tollgate, { rules: [{ name: 'inner', limit: 1, ...fw }], store: new MemoryStore({ clock }), clock, prefix: 'in' });
    child.get('/inner', async () => 'inner');
  });
  await app.ready();
  const get = async (url: string, method: 'GET' | 'POST' = 'GET') => (await app.inject({ method, url })).statusCode;
  expect([await get('/'), await get('/')]).toEqual([200, 429]);
  app.tollgate.update('ip', { limit: 100 });
  expect(await get('/')).toBe(429); // the tier rule `free` (1) refuses now
  app.tollgate.update('free', { limit: 100 });
  expect(await get('/')).toBe(200);
  expect([await get('/upload', 'POST'), await get('/upload', 'POST')]).toEqual([200, 429]);
  app.tollgate.update('upload', { limit: 3 });
  expect(await get('/upload', 'POST')).toBe(200);
  // The child scope's registration joined the same decorator.
  expect([await get('/inner'), await get('/inner')]).toEqual([200, 429]);
  app.tollgate.update('inner', { limit: 2 });
  expect(await get('/inner')).toBe(200);
  expect(() => app.tollgate.update('nope', { limit: 2 })).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_RULE' }));
  expect(() => app.tollgate.update('ip', { limit: -2 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_LIMIT' }));
});
