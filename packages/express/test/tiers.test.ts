/**
 * Tiers on Express beyond the shared scenarios: counting by outcome applies to a tier's
 * rules too (a tier rule with `skipFailed` gives back what a failed response consumed).
 */
import { ManualClock, MemoryStore } from '@tollgate/core';
import { rateLimit } from '@tollgate/express';
import express from 'express';
import request from 'supertest';
import { expect, it } from 'vitest';

it("a tier rule's skipFailed is honoured: failed responses give their unit back (tier rules were left out of counting by outcome)", async () => {
  const clock = new ManualClock(0);
  const limiter = rateLimit({
    tiers: { free: [{ name: 'free', limit: 2, window: '1m', algorithm: 'fixed-window', skipFailed: true }] },
    tier: () => 'free',
    store: new MemoryStore({ clock }),
    clock,
  });
  const app = express();
  app.use(limiter);
  app.get('/fail', (_req, res) => {
    res.status(500).send('no');
  });
  app.get('/ok', (_req, res) => {
    res.send('ok');
  });
  for (let i = 0; i < 5; i++) expect((await request(app).get('/fail')).status).toBe(500);
  expect((await request(app).get('/ok')).status).toBe(200);
  expect((await request(app).get('/ok')).status).toBe(200);
  expect((await request(app).get('/ok')).status).toBe(429);
});

it('operations by key on the middleware see tier rules and the limit an update set (the lookup kept the spec it was built with)', async () => {
  const clock = new ManualClock(0);
  const limiter = rateLimit({
    rules: [{ name: 'ip', key: () => 'k', limit: 100, window: '1m', algorithm: 'fixed-window' }],
    tiers: { pro: [{ name: 'pro', key: () => 'k', limit: 3, window: '1m', algorithm: 'fixed-window' }] },
    tier: () => 'pro',
    store: new MemoryStore({ clock }),
    clock,
  });
  const app = express();
  app.use(limiter);
  app.get('/', (_req, res) => {
    res.send('ok');
  });
  expect((await request(app).get('/')).status).toBe(200);
  limiter.update('ip', { limit: 50 });
  expect(await limiter.get('ip', 'k')).toMatchObject({ limit: 50, remaining: 49 });
  expect(await limiter.get('pro', 'k')).toMatchObject({ limit: 3, remaining: 2 });
});
