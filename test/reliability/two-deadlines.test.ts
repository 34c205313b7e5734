/**
 * Regression (issue 14, "two deadlines in one request"): when a decision took a rule's
 * last unit, the pipeline's next-admission peek (the exact `t` at r=0) made a second store
 * call with a deadline of its own. With Redis frozen and `timeoutMs: 150`, the decision
 * waited 150 ms for its own deadline, fell back to the store's local decision (which took
 * the last local unit), then peeked the frozen Redis for another 150 ms: the request
 * answered after about 305 ms. The whole request must answer within one `timeoutMs`.
 *
 * Each port (Express, Fastify, node:http) against a redis-server this file starts and
 * freezes with SIGSTOP (connections stay open, nothing answers).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { rateLimit as expressRateLimit } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { rateLimit as nodeRateLimit } from '@tollgate/node';
import { RedisStore } from '@tollgate/redis';
import express from 'express';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../setup/http.js';
import { type RedisServer, startRedis } from '../setup/redis.js';

const TIMEOUT_MS = 150;
/** Beyond a plain timer of TIMEOUT_MS started with the request: HTTP on loopback and scheduling, well under a second deadline. */
const SLACK_MS = 75;

/** A sliding window runs dry with an exact next admission unknown: the case that peeks. */
const rules = [
  {
    name: 'ip',
    key: (req: { headers: http.IncomingHttpHeaders }) => String(req.headers['x-k'] ?? 'k'),
    limit: 1,
    window: '1m' as const,
    algorithm: 'sliding-window' as const,
  },
];

type Listening = { port: number; close(): Promise<void> };

async function listen(server: http.Server): Promise<Listening> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const ports: Record<string, (store: RedisStore) => Promise<Listening>> = {
  async express(store) {
    const app = express();
    app.use(expressRateLimit({ rules, store }));
    app.get('/', (_req, res) => {
      res.end('ok');
    });
    return listen(http.createServer(app));
  },
  async fastify(store) {
    const app = Fastify();
    await app.register(tollgate, { rules, store });
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: (app.server.address() as { port: number }).port, close: () => app.close() };
  },
  async node(store) {
    const limit = nodeRateLimit({ rules, store });
    return listen(
      http.createServer(async (req, res) => {
        if (await limit(req, res)) res.end('ok');
      }),
    );
  },
};

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  redis?.resume();
  await redis?.destroy();
});

describe('two deadlines in one request: a decision that takes the last unit stays within timeoutMs', () => {
  for (const [name, make] of Object.entries(ports)) {
    it(`${name}: Redis frozen, timeoutMs ${TIMEOUT_MS}: the request answers within one deadline, not two`, async () => {
      const client = new Redis({ port: redis.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
      client.on('error', () => {});
      // The store's own fallback decides while Redis does not answer (`'local'`, the default).
      const store = new RedisStore({ client, prefix: `two-${name}:`, timeoutMs: TIMEOUT_MS });
      store.on('error', () => {});
      const app = await make(store);
      try {
        // Redis answering: the decision that empties the rule peeks, within the deadline.
        const warm = await send(app.port, { headers: { 'x-k': 'warm' } }).reply;
        expect(warm.status).toBe(200);
        expect(warm.headers.ratelimit).toMatch(/^"ip";r=0;t=\d+$/);

        redis.pause();
        const started = performance.now();
        let timer = 0;
        const probe = new Promise<void>((resolve) =>
          setTimeout(() => {
            timer = performance.now() - started;
            resolve();
          }, TIMEOUT_MS),
        );
        const r = await send(app.port).reply;
        const ms = performance.now() - started;
        await probe;
        // The local fallback admitted it and took its last unit (r=0): the case that peeked.
        expect(r.status).toBe(200);
        expect(r.headers.ratelimit).toMatch(/^"ip";r=0;t=\d+$/);
        expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
        expect(ms, `answered after ${ms.toFixed(0)} ms (a ${TIMEOUT_MS} ms timer fired after ${timer.toFixed(0)} ms)`).toBeLessThan(
          Math.max(TIMEOUT_MS, timer) + SLACK_MS,
        );
      } finally {
        redis.resume();
        await app.close();
        await store.close().catch(() => {});
        client.disconnect();
      }
    });
  }
});
