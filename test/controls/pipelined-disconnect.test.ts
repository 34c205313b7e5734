/**
 * A client pipelines several requests on one keep-alive connection behind a slow one, then
 * disconnects. Node emits neither `finish` nor `close` on the queued responses, so every
 * held request must be released from what does fire (the request's and the connection's
 * `close`): on node the `await limit(req, res)` of each settles (`false`), on every port
 * the held requests never reach the handler, and their slots and queue places are free for
 * the next client. Raw sockets, the manual clock, bounded by counts.
 */
import http from 'node:http';
import net from 'node:net';
import { serve } from '@hono/node-server';
import { All, Controller, type MiddlewareConsumer, Module, Req, Res } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  constant,
  createConcurrency,
  ManualClock,
  ManualTimers,
  MemorySlotStore,
  MemoryStore,
  type SlotStore,
  type Store,
} from '@tollgate/core';
import { acquireWhileConnected, hold, onceDone } from '@tollgate/core/http';
import * as tgExpress from '@tollgate/express';
import tollgateFastify, * as tgFastify from '@tollgate/fastify';
import * as tgHono from '@tollgate/hono';
import * as tgKoa from '@tollgate/koa';
import * as tgNest from '@tollgate/nestjs';
import * as tgNode from '@tollgate/node';
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import express from 'express';
import Fastify from 'fastify';
import { Hono, type MiddlewareHandler } from 'hono';
import { Redis } from 'ioredis';
import Koa from 'koa';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../setup/redis.js';
import { send, until } from './http.js';

/** Real-time bound on each wait for loopback I/O (generous: the machine may be busy). */
const BOUND = 10_000;

type Kind = 'slowDown' | 'concurrency' | 'leaky-queue' | 'all';

interface Ctx {
  clock: ManualClock;
  timers: ManualTimers;
  store: Store;
  slots: SlotStore;
}

/** Options of each control: every request under one key, so the pipelined ones are held. */
const options = {
  slowDown: (c: Ctx) => ({
    window: '10s' as const,
    delayAfter: 1,
    delay: 1000,
    key: constant('k'),
    store: c.store,
    clock: c.clock,
    timers: c.timers,
  }),
  concurrency: (c: Ctx) => ({ max: 1, queue: 6, queueTimeout: '1h' as const, key: constant('k'), store: c.slots, timers: c.timers }),
  rateLimit: (c: Ctx) => ({
    rules: [
      { name: 'q', key: constant('k'), algorithm: 'leaky-bucket' as const, mode: 'queue' as const, limit: 20, window: '10s' as const },
    ],
    store: c.store,
    clock: c.clock,
    timers: c.timers,
  }),
};

const stagesOf = (kind: Kind): Array<'slowDown' | 'concurrency' | 'rateLimit'> =>
  kind === 'all' ? ['slowDown', 'concurrency', 'rateLimit'] : [kind === 'leaky-queue' ? 'rateLimit' : kind];

interface App {
  port: number;
  /** Handlers that ran, by path. */
  starts: string[];
  /**
   * Continuations of held requests not yet settled: node's `await limit()` calls, Koa's and
   * Hono's `await next()` around the limiters; Express, Fastify and NestJS have no awaitable form.
   */
  unsettled?: () => number;
  close(): Promise<void>;
}

/** The app's handler: `/slow...` answers 60 s of virtual time later, anything else at once. */
function respond(c: Ctx, path: string, end: () => void): void {
  if (path.startsWith('/slow')) c.timers.setTimeout(end, 60_000);
  else end();
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

async function shut(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** The requests whose continuation has not settled, less those in their handler (the slow one). */
const unsettledHeld = (pending: Set<string>, starts: string[]): number => [...pending].filter((p) => !starts.includes(p)).length;

const ports: Record<string, (kind: Kind, c: Ctx) => Promise<App>> = {
  async node(kind, c) {
    const made = stagesOf(kind).map((s) =>
      s === 'slowDown'
        ? tgNode.slowDown(options.slowDown(c))
        : s === 'concurrency'
          ? tgNode.concurrency(options.concurrency(c))
          : tgNode.rateLimit(options.rateLimit(c)),
    );
    const starts: string[] = [];
    let unsettled = 0;
    const server = http.createServer(async (req, res) => {
      for (const limit of made) {
        unsettled++;
        let go: boolean;
        try {
          go = await limit(req, res);
        } finally {
          unsettled--;
        }
        if (!go) return;
      }
      starts.push(req.url ?? '');
      respond(c, req.url ?? '', () => res.end('ok'));
    });
    const port = await listen(server);
    return {
      port,
      starts,
      unsettled: () => unsettled,
      async close() {
        await shut(server);
        for (const m of made) await (m as { close?: () => unknown }).close?.();
      },
    };
  },
  async express(kind, c) {
    const app = express();
    const made = stagesOf(kind).map((s) =>
      s === 'slowDown'
        ? tgExpress.slowDown(options.slowDown(c))
        : s === 'concurrency'
          ? tgExpress.concurrency(options.concurrency(c))
          : tgExpress.rateLimit(options.rateLimit(c)),
    );
    for (const m of made) app.use(m);
    const starts: string[] = [];
    app.use((req, res) => {
      starts.push(req.url);
      respond(c, req.url, () => res.end('ok'));
    });
    const server = http.createServer(app);
    const port = await listen(server);
    return {
      port,
      starts,
      async close() {
        await shut(server);
        for (const m of made) await (m as { close?: () => unknown }).close?.();
      },
    };
  },
  async fastify(kind, c) {
    const app = Fastify();
    for (const s of stagesOf(kind)) {
      if (s === 'slowDown') await app.register(tgFastify.slowDown, options.slowDown(c));
      else if (s === 'concurrency') await app.register(tgFastify.concurrency, options.concurrency(c));
      else await app.register(tollgateFastify, options.rateLimit(c));
    }
    const starts: string[] = [];
    app.get('/*', (request, reply) => {
      starts.push(request.url);
      respond(c, request.url, () => reply.send('ok'));
      return reply;
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return {
      port: (app.server.address() as net.AddressInfo).port,
      starts,
      async close() {
        app.server.closeAllConnections();
        await app.close();
      },
    };
  },
  async koa(kind, c) {
    const app = new Koa();
    app.silent = true;
    const starts: string[] = [];
    const pending = new Set<string>();
    // The app's outermost middleware: the chain below it must settle for every request.
    app.use(async (ctx, next) => {
      pending.add(ctx.path);
      try {
        await next();
      } finally {
        pending.delete(ctx.path);
      }
    });
    const made = stagesOf(kind).map((s) =>
      s === 'slowDown'
        ? tgKoa.slowDown(options.slowDown(c))
        : s === 'concurrency'
          ? tgKoa.concurrency(options.concurrency(c))
          : tgKoa.rateLimit(options.rateLimit(c)),
    );
    for (const m of made) app.use(m);
    app.use(async (ctx) => {
      starts.push(ctx.path);
      await new Promise<void>((resolve) => respond(c, ctx.path, resolve));
      ctx.body = 'ok';
    });
    const server = http.createServer(app.callback());
    const port = await listen(server);
    return {
      port,
      starts,
      unsettled: () => unsettledHeld(pending, starts),
      async close() {
        await shut(server);
        for (const m of made) await (m as { close?: () => unknown }).close?.();
      },
    };
  },
  async hono(kind, c) {
    const app = new Hono();
    const starts: string[] = [];
    const pending = new Set<string>();
    app.use(async (ctx, next) => {
      pending.add(ctx.req.path);
      try {
        await next();
      } finally {
        pending.delete(ctx.req.path);
      }
    });
    const made = stagesOf(kind).map((s) =>
      s === 'slowDown'
        ? tgHono.slowDown(options.slowDown(c))
        : s === 'concurrency'
          ? tgHono.concurrency(options.concurrency(c))
          : tgHono.rateLimit(options.rateLimit(c)),
    );
    for (const m of made) app.use(m as MiddlewareHandler);
    app.all('*', async (ctx) => {
      starts.push(ctx.req.path);
      await new Promise<void>((resolve) => respond(c, ctx.req.path, resolve));
      return ctx.text('ok');
    });
    const server = await new Promise<http.Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as http.Server));
    });
    return {
      port: (server.address() as net.AddressInfo).port,
      starts,
      unsettled: () => unsettledHeld(pending, starts),
      async close() {
        await shut(server);
        for (const m of made) await (m as { close?: () => unknown }).close?.();
      },
    };
  },
  'NestJS on Express': (kind, c) => nestApp('express', kind, c),
  'NestJS on Fastify': (kind, c) => nestApp('fastify', kind, c),
};

// biome-ignore lint/suspicious/noExplicitAny: Express' or Fastify's request and reply
type Any = any;

/** NestJS: `slowDown` and `concurrency` as middleware, a `rateLimit` stage as the module's global guard (last). */
async function nestApp(platform: 'express' | 'fastify', kind: Kind, c: Ctx): Promise<App> {
  const stages = stagesOf(kind);
  const middleware = stages
    .filter((s) => s !== 'rateLimit')
    .map((s) => (s === 'slowDown' ? tgNest.slowDown(options.slowDown(c)) : tgNest.concurrency(options.concurrency(c))));
  const guarded = stages.includes('rateLimit');
  const starts: string[] = [];

  @Controller()
  class HeldController {
    @All(platform === 'fastify' ? ['/', '*'] : ['/', '{*path}'])
    answer(@Req() req: Any, @Res() res: Any) {
      const path = new URL(req.url, 'http://x').pathname;
      starts.push(path);
      respond(c, path, () => (platform === 'express' ? res.end('ok') : res.send('ok')));
    }
  }
  class AppModule {
    configure(consumer: MiddlewareConsumer) {
      if (platform === 'express' && middleware.length > 0)
        consumer.apply(...(middleware as Array<(...args: Any[]) => void>)).forRoutes(HeldController);
    }
  }
  Module({
    imports: guarded ? [tgNest.TollgateModule.forRoot(options.rateLimit(c) as never)] : [],
    controllers: [HeldController],
    providers: guarded ? [{ provide: APP_GUARD, useClass: tgNest.TollgateGuard }] : [],
  })(AppModule);
  const app = await NestFactory.create(AppModule, platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), {
    logger: false,
    abortOnError: false,
  });
  if (platform === 'fastify') for (const m of middleware) app.use(m);
  await app.listen(0, '127.0.0.1');
  const server = app.getHttpServer() as http.Server;
  return {
    port: (server.address() as net.AddressInfo).port,
    starts,
    async close() {
      server.closeAllConnections();
      await app.close();
      for (const m of middleware) await m.close();
    },
  };
}

/**
 * `paths` in one write on one connection, the connection destroyed once the first handler
 * ran (virtual time moves in small steps: a leaky-bucket queue lets the first go after T).
 */
async function pipelinedThenGone(app: App, timers: ManualTimers, paths: string[]): Promise<void> {
  const socket = net.connect({ port: app.port, host: '127.0.0.1' });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''));
  await until(
    async () => {
      await timers.advance(100);
      return app.starts.length >= 1;
    },
    'the slow request to reach its handler',
    BOUND,
  );
  socket.destroy();
}

const rejections: unknown[] = [];
const onRejection = (err: unknown) => rejections.push(err);
beforeAll(() => {
  process.on('unhandledRejection', onRejection);
});
afterAll(() => {
  process.off('unhandledRejection', onRejection);
});

let redisServer: RedisServer;
let redis: Redis;
let n = 0;
beforeAll(async () => {
  redisServer = await startRedis();
  redis = new Redis({ port: redisServer.port, host: '127.0.0.1', lazyConnect: true });
  await redis.connect();
});
afterAll(async () => {
  expect(await keysWithoutExpiry(redis, '*')).toEqual([]);
  redis.disconnect();
  await redisServer.destroy();
});

const storesOf = {
  memory: (clock: ManualClock) => ({ store: new MemoryStore({ clock }) as Store, slots: new MemorySlotStore() as SlotStore }),
  Redis: (clock: ManualClock) => {
    const prefix = `pd${++n}:`;
    return {
      store: new RedisStore({ client: redis, clock, prefix }) as Store,
      slots: new RedisSlotStore({ client: redis, prefix }) as SlotStore,
    };
  },
};

for (const [portName, make] of Object.entries(ports)) {
  for (const [storeName, makeStores] of Object.entries(storesOf)) {
    describe(`pipelined requests behind a slow one, then a disconnect: ${portName}, ${storeName} stores`, () => {
      const open: Array<() => Promise<void>> = [];
      afterEach(async () => {
        while (open.length > 0) await open.pop()?.();
      });

      async function start(kind: Kind) {
        const clock = new ManualClock(1_000_000);
        const timers = new ManualTimers(clock);
        const c: Ctx = { clock, timers, ...makeStores(clock) };
        const app = await make(kind, c);
        open.push(async () => {
          await app.close();
          await c.store.close();
          await c.slots.close();
          expect(timers.pending, 'virtual timers left behind').toBe(0);
          expect(rejections).toEqual([]);
        });
        return { ...c, app };
      }

      const held = ['/a', '/b', '/c', '/d', '/e', '/f'];

      for (const kind of ['slowDown', 'concurrency', 'leaky-queue', 'all'] as const) {
        it(`${kind}: every held request is released and never reaches the handler; the next client is served`, async () => {
          const t = await start(kind);
          await pipelinedThenGone(t.app, t.timers, ['/slow', ...held]);
          // Only the slow request's own timer (its handler's) may stay, and with Redis the
          // slot leases' renewal: every hold and queue wait was cleared.
          await until(() => t.timers.pending <= (storeName === 'Redis' ? 2 : 1), 'every hold and queue wait cleared', BOUND);
          if (t.app.unsettled !== undefined) {
            const unsettled = t.app.unsettled;
            await until(() => unsettled() === 0, 'every await limit(req, res) to settle', BOUND);
          }
          // The slow request's slot went with its connection: a new slow client is admitted
          // (virtual time moves while it is held), and (concurrency) six more find the
          // queue's six places free behind it.
          const next = [send(t.app.port, { path: '/slow-next' })];
          await until(
            async () => {
              await t.timers.advance(100);
              return t.app.starts.length === 2;
            },
            'the next client to be admitted',
            BOUND,
          );
          expect(t.app.starts[1]).toBe('/slow-next');
          for (const p of held) next.push(send(t.app.port, { path: `/again${p}` }));
          // The six are held (delayed, queued) behind it before time moves on.
          await until(() => t.timers.pending >= 7, 'the six later clients to be held', BOUND);
          let answered = 0;
          for (const s of next)
            s.reply.then(
              () => answered++,
              () => answered++,
            );
          await until(
            async () => {
              await t.timers.advance(1000);
              return answered === next.length;
            },
            'every later client to be answered',
            BOUND,
          );
          const replies = await Promise.all(next.map((s) => s.reply));
          expect(replies.map((r) => r.status)).toEqual(Array(7).fill(200));
          // The abandoned requests never ran.
          expect(t.app.starts.filter((p) => held.includes(p))).toEqual([]);
          expect(t.app.starts).toHaveLength(8);
        });
      }
    });
  }
}

describe('pipelined requests behind a slow one, then a disconnect: the helpers of @tollgate/core/http', () => {
  it('hold resolves false, onceDone runs once and acquireWhileConnected gives up the queue for every held request', async () => {
    const clock = new ManualClock(1_000_000);
    const timers = new ManualTimers(clock);
    const slots = new MemorySlotStore();
    const limit = createConcurrency<http.IncomingMessage>({
      max: 1,
      queue: 6,
      queueTimeout: '1h',
      key: constant('k'),
      store: slots,
      timers,
    });
    const held: Array<boolean | string> = [];
    let done = 0;
    let released = 0;
    const starts: string[] = [];
    const server = http.createServer((req, res) => {
      const path = req.url ?? '';
      onceDone(res, () => done++);
      if (path === '/slow') {
        // Takes the one slot and keeps it until its response is over.
        acquireWhileConnected(limit, req, res, res, undefined, (_q, _s, _n, o) => {
          if (o?.admitted)
            onceDone(res, () => {
              released++;
              o.release();
            });
          starts.push(path);
          timers.setTimeout(() => res.end('ok'), 60_000);
        });
      } else if (path.startsWith('/q')) {
        acquireWhileConnected(limit, req, res, res, undefined, (_q, _s, _n, o) => {
          held.push(o === undefined ? 'skipped' : o.admitted ? 'admitted' : o.reason);
          if (o?.admitted) o.release();
        });
      } else hold(res, 1000, timers).then((ok) => held.push(ok));
    });
    const port = await listen(server);
    const app: App = { port, starts, close: () => shut(server) };
    try {
      await pipelinedThenGone(app, timers, ['/slow', '/h1', '/h2', '/h3', '/q1', '/q2', '/q3']);
      await until(() => held.length === 6 && done === 7 && released === 1, 'every held request to be released', BOUND);
      expect([...held].sort()).toEqual(['aborted', 'aborted', 'aborted', false, false, false].sort());
      expect(limit.waiting).toBe(0);
      expect(limit.held).toBe(0);
      // Only the slow handler's own timer is left.
      expect(timers.pending).toBe(1);
      await timers.advance(60_000);
    } finally {
      await app.close();
      await limit.close();
      await slots.close();
    }
    expect(timers.pending).toBe(0);
    expect(rejections).toEqual([]);
  });
});
