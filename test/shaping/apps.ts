/**
 * The shaping scenario app on every port (see suite.ts): `limitRate` from the port's
 * package mounted with the scenario's options, then two routes:
 * - `/buf?n=N`: the body as one buffer of N bytes (a handler writing one huge chunk);
 * - `/stream?n=N`: a readable stream of N bytes in 16 KiB chunks (`pipeline`, or Fastify's
 *   and Koa's own stream sending, or a Web stream on Hono)
 *   (`n=-1`: endless), counting what the source produced in `produced`.
 */
import http from 'node:http';
import { pipeline, Readable } from 'node:stream';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { ByteRateLimit } from '@tollgate/core';
import { limitRate as expressLimitRate } from '@tollgate/express';
import { limitRateHook } from '@tollgate/fastify';
import { limitRate as honoLimitRate } from '@tollgate/hono';
import { limitRate as koaLimitRate } from '@tollgate/koa';
import { limitRate as nodeLimitRate } from '@tollgate/node';
import express5 from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { scenarioShape } from '../scenarios/hono-app.js';

// biome-ignore lint/suspicious/noExplicitAny: the options go to each port's own request type
export type ShapingOptions = Record<string, any>;

export interface ShapingApp {
  port: number;
  /** Bytes produced so far by the stream sources, by the request's `x-id` header. */
  produced: Map<string, number>;
  /** The sources of `/stream`, destroyed once their response is over. */
  destroyed: Set<string>;
  limit(): ByteRateLimit<unknown>;
  close(): Promise<void>;
}

export type MakeShapingApp = (options: ShapingOptions) => Promise<ShapingApp>;

const CHUNK = 16 * 1024;
const ZEROS = Buffer.alloc(CHUNK, 0x61);

function query(url: string | undefined): { path: string; n: number } {
  const u = new URL(url ?? '/', 'http://localhost');
  return { path: u.pathname, n: Number(u.searchParams.get('n') ?? '0') };
}

export function source(n: number, id: string, app: Pick<ShapingApp, 'produced' | 'destroyed'>): Readable {
  let left = n < 0 ? Number.POSITIVE_INFINITY : n;
  const r = new Readable({
    highWaterMark: CHUNK,
    read() {
      if (left <= 0) {
        this.push(null);
        return;
      }
      const size = Math.min(CHUNK, left);
      left -= size;
      app.produced.set(id, (app.produced.get(id) ?? 0) + size);
      this.push(size === CHUNK ? ZEROS : ZEROS.subarray(0, size));
    },
  });
  r.on('close', () => app.destroyed.add(id));
  return r;
}

function listen(server: http.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

const idOf = (req: { headers: http.IncomingHttpHeaders }) => String(req.headers['x-id'] ?? '');

export const nodeShapingApp: MakeShapingApp = async (options) => {
  // The app's errors as a plain 500, as the other frameworks' handlers answer (without logging).
  const onError = (_err: unknown, _req: http.IncomingMessage, res: http.ServerResponse) => {
    res.statusCode = 500;
    res.end('error');
  };
  const pace = nodeLimitRate({ ...options, onError } as never);
  const state = { produced: new Map<string, number>(), destroyed: new Set<string>() };
  const server = http.createServer(async (req, res) => {
    if (!(await pace(req, res))) return;
    const { path, n } = query(req.url);
    if (path === '/buf') res.end(Buffer.alloc(n, 0x62));
    else pipeline(source(n, idOf(req), state), res, () => {});
  });
  const port = await listen(server);
  return {
    port,
    ...state,
    limit: () => pace.limit as ByteRateLimit<unknown>,
    close: async () => {
      await closeServer(server);
      await pace.close();
    },
  };
};

function expressApp(factory: typeof express5): MakeShapingApp {
  return async (options) => {
    const pace = expressLimitRate(options as never);
    const state = { produced: new Map<string, number>(), destroyed: new Set<string>() };
    const app = factory();
    app.use(pace);
    app.get('/buf', (req, res) => {
      res.send(Buffer.alloc(query(req.url).n, 0x62));
    });
    app.get('/stream', (req, res) => {
      res.setHeader('Content-Type', 'application/octet-stream');
      pipeline(source(query(req.url).n, idOf(req), state), res, () => {});
    });
    app.use(((_err, _req, res, _next) => {
      res.status(500).end('error');
    }) as express5.ErrorRequestHandler);
    const server = http.createServer(app);
    const port = await listen(server);
    return {
      port,
      ...state,
      limit: () => pace.limit as ByteRateLimit<unknown>,
      close: async () => {
        await closeServer(server);
        await pace.close();
      },
    };
  };
}

export const express5ShapingApp = expressApp(express5);
export const express4ShapingApp = expressApp(express4 as unknown as typeof express5);

export const fastifyShapingApp: MakeShapingApp = async (options) => {
  const state = { produced: new Map<string, number>(), destroyed: new Set<string>() };
  const app = Fastify();
  const hook = limitRateHook(options as never);
  app.addHook('onRequest', hook);
  app.addHook('onClose', () => hook.close());
  app.get('/buf', (req, reply) => reply.send(Buffer.alloc(query(req.url).n, 0x62)));
  app.get('/stream', (req, reply) => reply.type('application/octet-stream').send(source(query(req.url).n, idOf(req.raw), state)));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  return {
    port,
    ...state,
    limit: () => hook.limit as ByteRateLimit<unknown>,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
};

export const koaShapingApp: MakeShapingApp = async (options) => {
  const state = { produced: new Map<string, number>(), destroyed: new Set<string>() };
  const pace = koaLimitRate(options as never);
  const app = new Koa();
  // A key function's throw becomes Koa's plain 500, without logging.
  app.silent = true;
  app.use(pace);
  app.use((ctx) => {
    const { path, n } = query(ctx.url);
    if (path === '/buf') ctx.body = Buffer.alloc(n, 0x62);
    else ctx.body = source(n, idOf(ctx.req), state);
  });
  const server = http.createServer(app.callback());
  const port = await listen(server);
  return {
    port,
    ...state,
    limit: () => pace.limit as ByteRateLimit<unknown>,
    close: async () => {
      await closeServer(server);
      await pace.close();
    },
  };
};

/** The source of `/stream` as a Web stream (Hono's bodies), destroyed when it is cancelled or read to its end. */
function webSource(n: number, id: string, app: Pick<ShapingApp, 'produced' | 'destroyed'>): ReadableStream<Uint8Array> {
  let left = n < 0 ? Number.POSITIVE_INFINITY : n;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (left <= 0) {
          app.destroyed.add(id);
          controller.close();
          return;
        }
        const size = Math.min(CHUNK, left);
        left -= size;
        app.produced.set(id, (app.produced.get(id) ?? 0) + size);
        controller.enqueue(new Uint8Array(size).fill(0x61));
      },
      cancel() {
        app.destroyed.add(id);
      },
    },
    { highWaterMark: 0 },
  );
}

export const honoShapingApp: MakeShapingApp = async (options) => {
  const state = { produced: new Map<string, number>(), destroyed: new Set<string>() };
  const pace = honoLimitRate({ ...options, connInfo: getConnInfo } as never);
  const app = new Hono();
  app.use(scenarioShape);
  app.use(pace);
  // A paced body leaves as a stream: the download states its length, which the server cannot know.
  app.get('/buf', (c) => c.body(new Uint8Array(query(c.req.url).n).fill(0x62), 200, { 'Content-Length': String(query(c.req.url).n) }));
  app.get('/stream', (c) => c.body(webSource(query(c.req.url).n, c.req.header('x-id') ?? '', state)));
  app.onError((_err, c) => c.text('error', 500));
  const server = await new Promise<http.Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as http.Server));
  });
  return {
    port: (server.address() as { port: number }).port,
    ...state,
    limit: () => pace.limit as ByteRateLimit<unknown>,
    close: async () => {
      await closeServer(server);
      await pace.close();
    },
  };
};
