import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { concurrency, type Decision, rateLimit, user } from '@tollgate/hono';
import { Hono } from 'hono';

const limiter = rateLimit({
  rules: [
    { name: 'ip', rate: '300/min' },
    { name: 'user', key: user((c) => c.req.header('x-user')), rate: '1000/h' },
  ],
  connInfo: getConnInfo,
  handler: (c, d) => c.json({ retryAfterMs: d.retryAfterMs }, 429),
});
const app = new Hono();
app.use(limiter);
app.use('/reports/*', concurrency({ max: 2, connInfo: getConnInfo }));
app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }), (c) => {
  const decision: Decision | undefined = c.get('rateLimit');
  return c.json({ remaining: decision?.rules[0]?.remaining });
});
export const server = serve({ fetch: app.fetch, port: 0 });
