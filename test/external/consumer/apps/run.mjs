// A tiny app per framework, in the consumer project, against the memory store or Redis:
//   node apps/run.mjs <express|fastify|node-http|koa|hono> <memory|redis> [redis port]
// Each allows 2 requests per minute per client address, sends 3 and prints one JSON line:
// the three statuses and the headers of the refusal. Exits by itself.
import http from 'node:http';

const [framework, storeKind, redisPort] = process.argv.slice(2);
// A sliding log: exact whatever the wall clock's phase (a window counter crossing its
// boundary between the requests would admit a third).
const rules = [{ name: 'ip', limit: 2, window: '1m', algorithm: 'sliding-log' }];

async function makeStore() {
  if (storeKind === 'memory') {
    const { MemoryStore } = await import('@tollgate/core');
    const store = new MemoryStore();
    return { store, close: () => store.close() };
  }
  const { Redis } = await import('ioredis');
  const { RedisStore } = await import('@tollgate/redis');
  const client = new Redis({ port: Number(redisPort), host: '127.0.0.1', maxRetriesPerRequest: 1 });
  // A generous deadline: on a loaded machine the default 100 ms would hand decisions to the
  // local fallback, which is the failure policy working, not what this app checks.
  const store = new RedisStore({ client, prefix: `consumer:${framework}:${process.pid}:`, timeoutMs: 10_000 });
  return {
    store,
    close: async () => {
      await store.close();
      await client.quit();
    },
  };
}

async function listen(server) {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server.address().port;
}

function get(port) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }));
    });
    req.on('error', reject);
  });
}

const { store, close } = await makeStore();
let port;
let stop;
if (framework === 'express') {
  const { default: express } = await import('express');
  const { rateLimit } = await import('@tollgate/express');
  const app = express();
  app.use(rateLimit({ rules, store }));
  app.get('/', (_req, res) => res.send('ok'));
  const server = http.createServer(app);
  port = await listen(server);
  stop = () => new Promise((r) => server.close(r));
} else if (framework === 'fastify') {
  const { default: Fastify } = await import('fastify');
  const { default: tollgate } = await import('@tollgate/fastify');
  const app = Fastify();
  await app.register(tollgate, { rules, store });
  app.get('/', async () => 'ok');
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = app.server.address().port;
  stop = () => app.close();
} else if (framework === 'node-http') {
  const { rateLimit } = await import('@tollgate/node');
  const limit = rateLimit({ rules, store });
  const server = http.createServer(async (req, res) => {
    if (!(await limit(req, res))) return;
    res.end('ok');
  });
  port = await listen(server);
  stop = () => new Promise((r) => server.close(r));
} else if (framework === 'hono') {
  const { Hono } = await import('hono');
  const { serve } = await import('@hono/node-server');
  const { getConnInfo } = await import('@hono/node-server/conninfo');
  const { rateLimit } = await import('@tollgate/hono');
  const app = new Hono();
  app.use(rateLimit({ rules, store, connInfo: getConnInfo }));
  app.get('/', (c) => c.text('ok'));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  port = server.address().port;
  stop = () => new Promise((r) => server.close(r));
} else if (framework === 'koa') {
  const { default: Koa } = await import('koa');
  const { rateLimit } = await import('@tollgate/koa');
  const app = new Koa();
  app.use(rateLimit({ rules, store }));
  app.use((ctx) => {
    ctx.body = 'ok';
  });
  const server = http.createServer(app.callback());
  port = await listen(server);
  stop = () => new Promise((r) => server.close(r));
} else {
  throw new Error(`unknown framework ${framework}`);
}

const replies = [];
for (let i = 0; i < 3; i++) replies.push(await get(port));
await stop();
await close();
const refused = replies[2].headers;
console.log(
  JSON.stringify({
    statuses: replies.map((r) => r.status),
    retryAfter: refused['retry-after'],
    ratelimit: refused.ratelimit,
    policy: refused['ratelimit-policy'],
  }),
);
