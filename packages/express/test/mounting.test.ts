/**
 * rateLimit works wherever Express middleware goes — app.use, a Router, a single route —
 * on Express 5 and Express 4 (the `express4` alias).
 */
import { rateLimit } from '@tollgate/express';
import express5 from 'express';
import express4 from 'express4';
import request from 'supertest';
import { describe, expect, it } from 'vitest';

const majors = [
  ['Express 5', express5],
  ['Express 4', express4 as unknown as typeof express5],
] as const;

// Windows from each key's first request: a clock-aligned minute ending mid-test would give a fresh budget.
const rule = (name: string, limit: number) => ({
  name,
  limit,
  window: '1m' as const,
  algorithm: 'fixed-window' as const,
  align: 'first-request' as const,
});

for (const [label, express] of majors) {
  describe(label, () => {
    it('on a router: only routes of that router count', async () => {
      const app = express();
      const api = express.Router();
      api.use(rateLimit({ rules: [rule('api', 2)] }));
      api.get('/items', (_req, res) => {
        res.send('items');
      });
      app.use('/api', api);
      app.get('/public', (_req, res) => {
        res.send('public');
      });
      expect((await request(app).get('/api/items')).status).toBe(200);
      expect((await request(app).get('/api/items')).status).toBe(200);
      const refused = await request(app).get('/api/items');
      expect(refused.status).toBe(429);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      for (let i = 0; i < 3; i++) expect((await request(app).get('/public')).status).toBe(200);
    });
    it('on a single route, and one instance on two routes shares its counters', async () => {
      const app = express();
      const shared = rateLimit({ rules: [rule('search', 2)] });
      app.get('/search', shared, (_req, res) => {
        res.send('search');
      });
      app.get('/suggest', shared, (_req, res) => {
        res.send('suggest');
      });
      app.get('/alone', rateLimit({ rules: [rule('alone', 1)] }), (req, res) => {
        res.json(req.rateLimit?.rules.map((r) => [r.name, r.remaining]));
      });
      expect((await request(app).get('/search')).status).toBe(200);
      expect((await request(app).get('/suggest')).status).toBe(200);
      expect((await request(app).get('/search')).status).toBe(429);
      const alone = await request(app).get('/alone');
      expect(alone.body).toEqual([['alone', 0]]);
      expect((await request(app).get('/alone')).status).toBe(429);
    });
    it('a route-level refusal refunds the app-level unit on this major too', async () => {
      const app = express();
      const limiter = rateLimit({ rules: [rule('ip', 3)] });
      app.use(limiter);
      app.post('/login', limiter.route({ rules: [rule('login', 1)] }), (_req, res) => {
        res.send('ok');
      });
      app.get('/', (_req, res) => {
        res.send('home');
      });
      expect((await request(app).post('/login')).status).toBe(200);
      expect((await request(app).post('/login')).status).toBe(429);
      // ip: 1 used by the first login, the refused one given back: 2 left.
      expect((await request(app).get('/')).status).toBe(200);
      expect((await request(app).get('/')).status).toBe(200);
      expect((await request(app).get('/')).status).toBe(429);
    });
  });
}
