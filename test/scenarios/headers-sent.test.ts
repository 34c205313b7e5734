/**
 * A limiter that runs after a handler already sent the response's head (it started
 * streaming, then passed the request on): no header and no 429 can be written any more.
 * An admitted request goes on without tollgate's headers; a refused one is counted and
 * reported (`onRejected`), its response is cut off so that the client never takes the
 * partial body for a whole one, the later handlers never run, and nothing reaches the app's
 * error handler (before: `ERR_HTTP_HEADERS_SENT` there). The same for a limiter's other
 * answers: a failing store's 503 under `onStoreError: 'deny'` and the deny list's 403. On
 * every Node-based port that lets a handler write before a limiter: Express, Koa, node,
 * NestJS on Express (middleware).
 */
import http from 'node:http';
import type net from 'node:net';
import { constant, type Store, type StoreDecision } from '@tollgate/core';
import * as tgExpress from '@tollgate/express';
import * as tgKoa from '@tollgate/koa';
import * as tgNode from '@tollgate/node';
import express from 'express';
import Koa from 'koa';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

/** One rule admitting one request; the second is refused. */
const rules = [{ name: 'once', key: constant('k'), limit: 1, window: '1h' as const }];

interface Seen {
  errors: unknown[];
  rejected: number;
  /** Handlers after the limiter that ran. */
  after: number;
}

interface Answer {
  status: number;
  /** True when the response ended as sent; false when it was cut off. */
  complete: boolean;
  text: string;
  headers: http.IncomingHttpHeaders;
}

function get(port: number): Promise<Answer> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, complete: true, text, headers: res.headers }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, complete: false, text, headers: res.headers }));
      res.on('aborted', () => resolve({ status: res.statusCode ?? 0, complete: false, text, headers: res.headers }));
    });
    // Cut off before the head reached the client (its bytes were still queued): nothing came.
    req.on('error', () => resolve({ status: 0, complete: false, text: '', headers: {} }));
    // Never answered: given up, bounded (the cases check that nothing escaped either).
    req.setTimeout(5000, () => req.destroy());
  });
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

const open: http.Server[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

/** The head and a first chunk go out before the limiter runs. */
function streamStarted(res: http.ServerResponse): void {
  res.writeHead(200, { 'Content-Type': 'text/plain' });
  res.write('part;');
}

/** Options added to the limiter's (a failing store, a deny list). */
type Extra = Record<string, unknown>;

const apps: Record<string, (seen: Seen, extra?: Extra) => Promise<number>> = {
  async express(seen, extra) {
    const app = express();
    app.use((_req, res, next) => {
      streamStarted(res);
      next();
    });
    app.use(tgExpress.rateLimit({ rules, onRejected: () => void seen.rejected++, ...extra }));
    app.use((_req, res) => {
      seen.after++;
      res.end('rest');
    });
    app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      seen.errors.push(err);
      res.end();
    });
    const server = http.createServer(app);
    open.push(server);
    return listen(server);
  },
  async koa(seen, extra) {
    const app = new Koa();
    app.on('error', (err) => seen.errors.push(err));
    app.use(async (ctx, next) => {
      // The body is written by hand, as Koa documents for a stream it does not own.
      ctx.respond = false;
      streamStarted(ctx.res);
      await next();
    });
    app.use(tgKoa.rateLimit({ rules, onRejected: () => void seen.rejected++, ...extra }));
    app.use(async (ctx) => {
      seen.after++;
      ctx.res.end('rest');
    });
    const server = http.createServer(app.callback());
    open.push(server);
    return listen(server);
  },
  async node(seen, extra) {
    const limit = tgNode.rateLimit({
      rules,
      onRejected: () => void seen.rejected++,
      ...extra,
      onError: (err, _req, res) => {
        seen.errors.push(err);
        res.end();
      },
    });
    const server = http.createServer(async (req, res) => {
      streamStarted(res);
      if (!(await limit(req, res))) return;
      seen.after++;
      res.end('rest');
    });
    open.push(server);
    return listen(server);
  },
};

describe('a limiter after the response head went out', () => {
  for (const [name, make] of Object.entries(apps)) {
    it(`${name}: admitted goes on without headers; refused is counted, cut off, never an error`, async () => {
      const seen: Seen = { errors: [], rejected: 0, after: 0 };
      const port = await make(seen);
      const first = await get(port);
      expect(first).toMatchObject({ status: 200, complete: true, text: 'part;rest' });
      expect(first.headers.ratelimit).toBeUndefined();
      const second = await get(port);
      // The head and the first chunk were written already: the rest never comes, and the client can tell.
      expect(second.complete).toBe(false);
      expect(second.text).not.toContain('rest');
      expect(seen).toEqual({ errors: [], rejected: 1, after: 1 });
    });
  }
});

/** A store whose every decision fails. */
function failingStore(): Store {
  const fail = () => Promise.reject(new Error('store down'));
  return { consume: fail as () => Promise<StoreDecision>, peek: fail, refund: fail, reset: fail, close: async () => {} };
}

describe('an answer that is not a rule refusal, after the response head went out', () => {
  const escaped: unknown[] = [];
  const onEscape = (err: unknown) => escaped.push(err);
  beforeAll(() => {
    process.on('unhandledRejection', onEscape);
    process.on('uncaughtException', onEscape);
  });
  afterAll(() => {
    process.off('unhandledRejection', onEscape);
    process.off('uncaughtException', onEscape);
  });
  const cases: [string, () => Extra][] = [
    [
      "a failing store under onStoreError 'deny' (its 503 threw ERR_HTTP_HEADERS_SENT: an unhandled rejection, the request never answered)",
      () => ({ store: failingStore(), onStoreError: 'deny' }),
    ],
    [
      'a deny list (its 403 threw ERR_HTTP_HEADERS_SENT: to the error handler, or the request never answered)',
      () => ({ deny: () => true }),
    ],
  ];
  for (const [what, extra] of cases) {
    for (const [name, make] of Object.entries(apps)) {
      it(`${name}: ${what}: cut off, never an error`, async () => {
        escaped.length = 0;
        const seen: Seen = { errors: [], rejected: 0, after: 0 };
        const port = await make(seen, extra());
        const answer = await get(port);
        expect(answer.complete).toBe(false);
        expect(answer.text).not.toContain('rest');
        expect(seen.errors).toEqual([]);
        expect(seen.after).toBe(0);
        expect(escaped).toEqual([]);
      });
    }
  }
});
