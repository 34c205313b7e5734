// Benchmark server variants: the bare frameworks, tollgate on each (memory and Redis;
// one rule and a four-rule stack; nothing rejected and everything rejected), and the
// peers with equivalent configurations. Every server answers GET / with "hello".
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const ALLOW = 1_000_000_000; // never reached in a run
const body = 'hello';

async function redisClient(port) {
  const { Redis } = await import('ioredis');
  const client = new Redis({ port, host: '127.0.0.1', enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  await client.ping();
  return client;
}

function expressServer(install) {
  return async (opts) => {
    const express = (await import('express')).default;
    const app = express();
    app.disable('x-powered-by');
    const cleanup = (await install?.(app, opts)) ?? (async () => {});
    app.get('/', (_req, res) => res.send(body));
    let server;
    return {
      listen: () =>
        new Promise((resolve) => {
          server = app.listen(0, '127.0.0.1', () => resolve({ port: server.address().port }));
        }),
      get raw() {
        return server;
      },
      close: async () => {
        await new Promise((r) => server.close(r));
        await cleanup();
      },
    };
  };
}

function fastifyServer(install) {
  return async (opts) => {
    const Fastify = (await import('fastify')).default;
    const app = Fastify({ logger: false });
    const cleanup = (await install?.(app, opts)) ?? (async () => {});
    app.get('/', async () => body);
    return {
      listen: async () => {
        await app.listen({ port: 0, host: '127.0.0.1' });
        return { port: app.server.address().port };
      },
      get raw() {
        return app.server;
      },
      close: async () => {
        await app.close();
        await cleanup();
      },
    };
  };
}

function nodeServer(install) {
  return async (opts) => {
    const http = await import('node:http');
    const { guard = null, cleanup = async () => {} } = (await install?.(opts)) ?? {};
    const server = http.createServer(async (req, res) => {
      if (guard !== null && !(await guard(req, res))) return;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end(body);
    });
    return {
      listen: () => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port }))),
      close: async () => {
        await new Promise((r) => server.close(r));
        await cleanup();
      },
      raw: server,
    };
  };
}

function tgNode(kind, n) {
  return nodeServer(async (opts) => {
    const { rateLimit } = await tollgate('@tollgate/node', 'TOLLGATE_NODE');
    const s = await tgStore(kind, opts);
    const guard = rateLimit({ rules: await tgRules(n, ALLOW, '1m'), ...(s.store ? { store: s.store } : {}) });
    return { guard, cleanup: s.close };
  });
}

// TOLLGATE_EXPRESS / TOLLGATE_FASTIFY / TOLLGATE_NODE=/path/to/dist/index.mjs measure a private build (a
// shared checkout's dist may be rebuilt by someone else in the middle of a run).
const tollgate = (name, env) => (process.env[env] ? import(pathToFileURL(process.env[env]).href) : import(name));

const tgRules = async (n, limit, window) => {
  const { constant } = await import('@tollgate/core');
  const rules = [{ name: 'ip', limit, window }];
  if (n >= 4) {
    rules.push(
      { name: 'tenant', key: constant('tenant'), limit, window },
      { name: 'global', key: constant('all'), limit, window },
      { name: 'endpoint', key: constant('GET /'), limit, window },
    );
  }
  return rules;
};

/** kind: 'memory', 'redis', or 'redis lease' (the store's default lease, { max: 100, ttl: '1s' }). */
const tgStore = async (kind, opts) => {
  if (!kind.startsWith('redis')) return { store: undefined, close: async () => {} };
  const { RedisStore } = await import('@tollgate/redis');
  const client = await redisClient(opts.redisPort);
  // BENCH_REDIS_TIMEOUT_MS: a longer deadline where Redis answers slowly (callgrind's http-server.mjs).
  const timeoutMs = Number(process.env.BENCH_REDIS_TIMEOUT_MS) || undefined;
  const store = new RedisStore({
    client,
    prefix: `bench${process.pid}`,
    ...(timeoutMs ? { timeoutMs } : {}),
    ...(kind === 'redis lease' ? { lease: {} } : {}),
  });
  return {
    store,
    close: async () => {
      await store.close();
      await client.quit();
    },
  };
};

function tgExpress(kind, n, reject, extra = {}) {
  return expressServer(async (app, opts) => {
    const { rateLimit } = await tollgate('@tollgate/express', 'TOLLGATE_EXPRESS');
    const s = await tgStore(kind, opts);
    const rules = await tgRules(n, reject ? 1 : ALLOW, reject ? '1h' : '1m');
    app.use(rateLimit({ rules, ...(s.store ? { store: s.store } : {}), ...extra }));
    return s.close;
  });
}

// The floor of any limiter that answers with rate-limit headers: the two draft-10 headers
// tollgate writes for one rule, as constants, with no deciding at all.
const POLICY = '"ip";q=1000000000;w=60';
const STATE = '"ip";r=999999999;t=60';

function tgFastify(kind, n, reject, extra = {}) {
  return fastifyServer(async (app, opts) => {
    const plugin = (await tollgate('@tollgate/fastify', 'TOLLGATE_FASTIFY')).default;
    const s = await tgStore(kind, opts);
    const rules = await tgRules(n, reject ? 1 : ALLOW, reject ? '1h' : '1m');
    await app.register(plugin, { rules, ...(s.store ? { store: s.store } : {}), ...extra });
    return s.close;
  });
}

export const variants = {
  'node bare': nodeServer(),
  'node tollgate memory 1 rule': tgNode('memory', 1),
  'node tollgate memory 4 rules': tgNode('memory', 4),
  'node tollgate redis 1 rule': tgNode('redis', 1),
  'node tollgate redis 4 rules': tgNode('redis', 4),
  'express bare': expressServer(),
  'express tollgate memory 1 rule': tgExpress('memory', 1, false),
  'express tollgate memory 1 rule, no headers': tgExpress('memory', 1, false, { headers: false }),
  'express two static headers (floor)': expressServer(async (app) => {
    app.use((_req, res, next) => {
      res.setHeader('RateLimit-Policy', POLICY);
      res.setHeader('RateLimit', STATE);
      next();
    });
  }),
  'express tollgate memory 4 rules': tgExpress('memory', 4, false),
  'express tollgate memory reject': tgExpress('memory', 1, true),
  'express tollgate redis 1 rule': tgExpress('redis', 1, false),
  'express tollgate redis lease 1 rule': tgExpress('redis lease', 1, false),
  'express tollgate redis 4 rules': tgExpress('redis', 4, false),
  'express tollgate redis reject': tgExpress('redis', 1, true),
  'express express-rate-limit memory': expressServer(async (app) => {
    const { rateLimit } = await import('express-rate-limit');
    app.use(rateLimit({ windowMs: 60_000, limit: ALLOW, standardHeaders: 'draft-8', legacyHeaders: false }));
  }),
  'express rate-limit-redis': expressServer(async (app, opts) => {
    const { rateLimit } = await import('express-rate-limit');
    const { RedisStore } = await import('rate-limit-redis');
    const client = await redisClient(opts.redisPort);
    const store = new RedisStore({ sendCommand: (command, ...args) => client.call(command, ...args), prefix: `erl${process.pid}:` });
    app.use(rateLimit({ windowMs: 60_000, limit: ALLOW, standardHeaders: 'draft-8', legacyHeaders: false, store }));
    return async () => client.quit();
  }),
  'express express-rate-limit reject': expressServer(async (app) => {
    const { rateLimit } = await import('express-rate-limit');
    app.use(rateLimit({ windowMs: 3_600_000, limit: 1, standardHeaders: 'draft-8', legacyHeaders: false }));
  }),
  'express rate-limiter-flexible memory': expressServer(async (app) => {
    const { RateLimiterMemory } = require('rate-limiter-flexible');
    const rl = new RateLimiterMemory({ points: ALLOW, duration: 60 });
    app.use((req, res, next) =>
      rl.consume(req.ip).then(
        () => next(),
        () => res.status(429).send('Too Many Requests'),
      ),
    );
  }),
  'express rate-limiter-flexible redis': expressServer(async (app, opts) => {
    const { RateLimiterRedis } = require('rate-limiter-flexible');
    const client = await redisClient(opts.redisPort);
    const rl = new RateLimiterRedis({ storeClient: client, points: ALLOW, duration: 60, keyPrefix: `rlf${process.pid}` });
    app.use((req, res, next) =>
      rl.consume(req.ip).then(
        () => next(),
        () => res.status(429).send('Too Many Requests'),
      ),
    );
    return async () => client.quit();
  }),
  'fastify bare': fastifyServer(),
  'fastify tollgate memory 1 rule': tgFastify('memory', 1, false),
  'fastify tollgate memory 1 rule, no headers': tgFastify('memory', 1, false, { headers: false }),
  'fastify two static headers (floor)': fastifyServer(async (app) => {
    app.addHook('onRequest', (_req, reply, done) => {
      reply.header('ratelimit-policy', POLICY);
      reply.header('ratelimit', STATE);
      done();
    });
  }),
  'fastify tollgate memory 4 rules': tgFastify('memory', 4, false),
  'fastify tollgate memory reject': tgFastify('memory', 1, true),
  'fastify tollgate redis 1 rule': tgFastify('redis', 1, false),
  'fastify tollgate redis 4 rules': tgFastify('redis', 4, false),
  'fastify tollgate redis reject': tgFastify('redis', 1, true),
  'fastify @fastify/rate-limit memory': fastifyServer(async (app) => {
    await app.register((await import('@fastify/rate-limit')).default, { max: ALLOW, timeWindow: 60_000 });
  }),
  'fastify @fastify/rate-limit reject': fastifyServer(async (app) => {
    await app.register((await import('@fastify/rate-limit')).default, { max: 1, timeWindow: 3_600_000 });
  }),
  'fastify @fastify/rate-limit redis': fastifyServer(async (app, opts) => {
    const client = await redisClient(opts.redisPort);
    await app.register((await import('@fastify/rate-limit')).default, {
      max: ALLOW,
      timeWindow: 60_000,
      redis: client,
      nameSpace: `frl${process.pid}-`,
    });
    return async () => client.quit();
  }),
};
