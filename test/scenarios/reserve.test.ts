/**
 * Costs known after the response, on every port (Express, Fastify, node:http, Koa, Hono), over real
 * loopback sockets: a streamed response (server-sent events) settled by the rule's
 * `actualCost` when its stream ends, a debt refusing the next request with an exact
 * `Retry-After`, a handler settling itself with `req.rateLimit.settle(n)` (once), and an
 * aborted stream keeping its estimate.
 */
import http from 'node:http';
import { Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { ManualClock, MemoryStore, type Rule, TollgateError } from '@tollgate/core';
import { rateLimit as expressLimit } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { rateLimit as honoLimit } from '@tollgate/hono';
import { rateLimit as koaLimit } from '@tollgate/koa';
import { rateLimit as nodeLimit } from '@tollgate/node';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../setup/http.js';

type Counted = { tokens?: number };

// Per API key, 100 tokens a minute; a request reserves 10 and is settled at what it streamed.
const RULES: Rule<http.IncomingMessage>[] = [
  {
    name: 'tokens',
    key: () => 'key1',
    algorithm: 'token-bucket',
    limit: 100,
    window: '1m',
    cost: 10,
    actualCost: (_req, res) => (res as Counted).tokens ?? 10,
  },
];

/** `n` events, one per token, counted on Node's response as they go out. */
function events(res: http.ServerResponse, n: number): Readable {
  const counted = res as Counted;
  counted.tokens = 0;
  return Readable.from(
    (async function* () {
      for (let i = 0; i < n; i++) {
        counted.tokens = (counted.tokens ?? 0) + 1;
        yield `data: token ${i}\n\n`;
        await tick();
      }
    })(),
  );
}

/** What a handler that settles itself answers: its settle's outcome, and a second settle's. */
async function settleTwice(rl: { settle(n: number): Promise<void> } | undefined, n: number) {
  await rl?.settle(n);
  const again = await rl?.settle(n).then(
    () => 'settled again',
    (e: unknown) => (e instanceof TollgateError ? e.code : String(e)),
  );
  return { again };
}

interface App {
  port: number;
  remaining(): Promise<number>;
  /** Whether the server has seen the stream's response close before it finished. */
  aborted(): boolean;
  close(): Promise<void>;
}

type MakeApp = (clock: ManualClock) => Promise<App>;

const PORTS: { name: string; make: MakeApp }[] = [
  {
    name: 'express',
    async make(clock) {
      const limiter = expressLimit({ rules: RULES as never, store: new MemoryStore({ clock, sweepIntervalMs: 0 }), clock });
      const app = express();
      let aborted = false;
      app.use(limiter);
      app.get('/stream', (req, res) => {
        res.setHeader('Content-Type', 'text/event-stream');
        res.on('close', () => {
          if (!res.writableFinished) aborted = true;
        });
        events(res, Number(req.query.n)).pipe(res);
      });
      app.get('/settle', async (req, res) => {
        res.json(await settleTwice(req.rateLimit, Number(req.query.n)));
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return {
        port: (server.address() as { port: number }).port,
        remaining: async () => (await limiter.get('tokens', 'key1')).remaining,
        aborted: () => aborted,
        close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    },
  },
  {
    name: 'fastify',
    async make(clock) {
      const app = Fastify({ logger: false });
      await app.register(tollgate, { rules: RULES as never, store: new MemoryStore({ clock, sweepIntervalMs: 0 }), clock });
      let aborted = false;
      app.get('/stream', (request, reply) => {
        reply.raw.on('close', () => {
          if (!reply.raw.writableFinished) aborted = true;
        });
        reply.header('Content-Type', 'text/event-stream');
        return reply.send(events(reply as never, Number((request.query as { n: string }).n)));
      });
      app.get('/settle', (request) => settleTwice(request.rateLimit, Number((request.query as { n: string }).n)));
      await app.listen({ port: 0, host: '127.0.0.1' });
      return {
        port: (app.server.address() as { port: number }).port,
        remaining: async () => (await app.tollgate.get('tokens', 'key1')).remaining,
        aborted: () => aborted,
        close: () => app.close(),
      };
    },
  },
  {
    name: 'node',
    async make(clock) {
      const limit = nodeLimit({ rules: RULES as never, store: new MemoryStore({ clock, sweepIntervalMs: 0 }), clock });
      let aborted = false;
      const server = http.createServer(async (req, res) => {
        if (!(await limit(req, res))) return;
        const url = new URL(req.url ?? '/', 'http://localhost');
        const n = Number(url.searchParams.get('n'));
        if (url.pathname === '/stream') {
          res.setHeader('Content-Type', 'text/event-stream');
          res.on('close', () => {
            if (!res.writableFinished) aborted = true;
          });
          events(res, n).pipe(res);
          return;
        }
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify(await settleTwice(req.rateLimit, n)));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return {
        port: (server.address() as { port: number }).port,
        remaining: async () => (await limit.get('tokens', 'key1')).remaining,
        aborted: () => aborted,
        close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    },
  },
  {
    name: 'koa',
    async make(clock) {
      const limiter = koaLimit({ rules: RULES as never, store: new MemoryStore({ clock, sweepIntervalMs: 0 }), clock });
      const app = new Koa();
      let aborted = false;
      app.use(limiter);
      app.use(async (ctx) => {
        const n = Number(ctx.query.n);
        if (ctx.path === '/stream') {
          ctx.res.on('close', () => {
            if (!ctx.res.writableFinished) aborted = true;
          });
          ctx.type = 'text/event-stream';
          // Counted on the context: Koa's actualCost is given the context.
          ctx.body = events(ctx as never, n);
          return;
        }
        ctx.body = await settleTwice(ctx.state.rateLimit, n);
      });
      const server = http.createServer(app.callback());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return {
        port: (server.address() as { port: number }).port,
        remaining: async () => (await limiter.get('tokens', 'key1')).remaining,
        aborted: () => aborted,
        close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    },
  },
  {
    name: 'hono',
    async make(clock) {
      const limiter = honoLimit({
        rules: RULES as never,
        store: new MemoryStore({ clock, sweepIntervalMs: 0 }),
        clock,
        connInfo: getConnInfo,
      });
      const app = new Hono();
      let aborted = false;
      app.use(limiter);
      app.get('/stream', (c) => {
        const outgoing = (c.env as { outgoing: http.ServerResponse }).outgoing;
        outgoing.on('close', () => {
          if (!outgoing.writableFinished) aborted = true;
        });
        // Counted on the context: Hono's actualCost is given the context.
        const body = Readable.toWeb(events(c as never, Number(c.req.query('n')))) as ReadableStream;
        return c.body(body, 200, { 'Content-Type': 'text/event-stream' });
      });
      app.get('/settle', async (c) => c.json(await settleTwice(c.get('rateLimit'), Number(c.req.query('n')))));
      const server = await new Promise<http.Server>((resolve) => {
        const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as http.Server));
      });
      return {
        port: (server.address() as { port: number }).port,
        remaining: async () => (await limiter.get('tokens', 'key1')).remaining,
        aborted: () => aborted,
        close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      };
    },
  },
];

/** Polls `read` (bounded: 200 turns of the event loop) until it gives `want`; returns the last value. */
async function eventually(read: () => Promise<number>, want: number): Promise<number> {
  let v = await read();
  for (let i = 0; i < 200 && v !== want; i++) {
    await tick();
    v = await read();
  }
  return v;
}

describe.each(PORTS)('$name: reserve and settle over HTTP', ({ make }) => {
  let app: App | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("a streamed response is settled by the rule's actualCost when its stream ends", async () => {
    app = await make(new ManualClock(Date.UTC(2026, 0, 1)));
    const reply = await send(app.port, { path: '/stream?n=40' }).reply;
    expect(reply.status).toBe(200);
    expect(reply.text.match(/^data: /gm)?.length).toBe(40);
    // Reserved 10 (90 left), settled at 40: 60.
    expect(await eventually(() => (app as App).remaining(), 60)).toBe(60);
  });

  it('an over-run leaves a debt: the next request is refused with an exact Retry-After, then admitted', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    app = await make(clock);
    await send(app.port, { path: '/stream?n=250' }).reply;
    expect(await eventually(() => (app as App).remaining(), 0)).toBe(0);
    // 100 - 250 = -150 tokens; a request of 10 needs 160, at 0.6 s a token: 96 s.
    const refused = await send(app.port, { path: '/settle?n=1' }).reply;
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('96');
    expect(refused.headers.ratelimit).toContain('"tokens";r=0;t=96');
    clock.advance(95_999);
    expect((await send(app.port, { path: '/settle?n=1' }).reply).status).toBe(429);
    clock.advance(1);
    expect((await send(app.port, { path: '/settle?n=1' }).reply).status).toBe(200);
  });

  it('a handler settles itself with req.rateLimit.settle(n), once; later responses show it', async () => {
    app = await make(new ManualClock(Date.UTC(2026, 0, 1)));
    const first = await send(app.port, { path: '/settle?n=3' }).reply;
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ again: 'TG_ALREADY_SETTLED' });
    // The handler's settle wins over actualCost (which would say 10): 100 - 3.
    expect(await app.remaining()).toBe(97);
    const second = await send(app.port, { path: '/settle?n=0' }).reply;
    // Reserved 10 of 97 when its headers were written.
    expect(second.headers.ratelimit).toContain('"tokens";r=87;');
    expect(await app.remaining()).toBe(97);
  });

  it('an aborted stream keeps its estimate', async () => {
    app = await make(new ManualClock(Date.UTC(2026, 0, 1)));
    const live = app;
    await new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port: live.port, path: '/stream?n=100000' }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) =>
        err.message.includes('aborted') || (err as { code?: string }).code === 'ECONNRESET' ? undefined : reject(err),
      );
    });
    for (let i = 0; i < 500 && !live.aborted(); i++) await tick();
    expect(live.aborted()).toBe(true);
    for (let i = 0; i < 20; i++) await tick();
    expect(await live.remaining()).toBe(90);
  });
});

describe('express: an app-level and a route-level stage settle together', () => {
  it('req.rateLimit.settle(n) settles every admitted stage of the request', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const limiter = expressLimit({ rules: RULES as never, store, clock });
    const app = express();
    app.use(limiter);
    const route: Rule<http.IncomingMessage> = {
      name: 'route',
      key: () => 'key1',
      algorithm: 'fixed-window',
      limit: 50,
      window: '1h',
      cost: 5,
    };
    app.get('/both', limiter.route({ rules: [route] as never }), async (req, res) => {
      await req.rateLimit?.settle(30);
      res.json({ rules: req.rateLimit?.rules.map((r) => r.name) });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const reply = await send((server.address() as { port: number }).port, { path: '/both' }).reply;
      expect(reply.body).toEqual({ rules: ['tokens', 'route'] });
      // Both reserved (10 and 5), both settled at 30.
      expect((await limiter.get('tokens', 'key1')).remaining).toBe(70);
      expect((await limiter.get('route', 'key1')).remaining).toBe(20);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
