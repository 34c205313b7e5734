// A Hono app with tollgate: two stacked rules for every route, one more for GET /export.
// `node server.mjs`, then `curl -i http://127.0.0.1:3000/` a few times.
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { rateLimit } from '@tollgate/hono';
import { Hono } from 'hono';

const limiter = rateLimit({
  rules: [
    { name: 'burst', limit: 3, window: '10s' },
    { name: 'hourly', limit: 100, window: '1h' },
  ],
  // The client address from the runtime (Bun: hono/bun, Deno: hono/deno, ...).
  connInfo: getConnInfo,
});

const app = new Hono();
app.use(limiter);
app.get('/', (c) => c.json({ hello: 'world', remaining: c.get('rateLimit')?.rules.map((r) => [r.name, r.remaining]) }));
app.get('/export', limiter.route({ rules: [{ name: 'export', limit: 5, window: '15m' }] }), (c) => c.json({ rows: [] }));

const server = serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000), hostname: '127.0.0.1' }, (info) =>
  console.log(`hono-basic listening on http://127.0.0.1:${info.port}/`),
);
process.on('SIGINT', () => server.close());
