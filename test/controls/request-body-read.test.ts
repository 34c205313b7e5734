/**
 * A request whose body has been read to the end emits `close` (Node 16 and later) while
 * its client still waits for the answer. The controls took that `close` for a client that
 * went away:
 *
 * - a concurrency slot taken before a body parser was given back as soon as the body was
 *   parsed: ten POSTs against `max: 2` ran their handlers at once;
 * - a concurrency limit (or a leaky-bucket queue, a Fastify limiter deciding in
 *   `preHandler`) after the body parser saw the request as already gone and never
 *   answered it: the client waited until its own timeout.
 *
 * Real servers on loopback, one connection per request, on Express, Fastify and node:http.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { concurrency as expressConcurrency, rateLimit as expressRateLimit } from '@tollgate/express';
import tollgate, { constant, concurrency as fastifyConcurrency } from '@tollgate/fastify';
import { concurrency as nodeConcurrency } from '@tollgate/node';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';

/** Longer than any answer here takes, even on a busy machine: a request still unanswered then is counted as hung. */
const HUNG_MS = 12_000;

const servers: http.Server[] = [];
const fastifies: FastifyInstance[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  for (const f of fastifies.splice(0)) await f.close();
});

async function listen(handler: http.RequestListener): Promise<number> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return (server.address() as AddressInfo).port;
}

/** POSTs a small JSON body; resolves the status, or 0 when no answer came within HUNG_MS. */
function post(port: number): Promise<number> {
  const body = '{"a":1}';
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      req.destroy();
      resolve(0);
    }, HUNG_MS);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          clearTimeout(timer);
          resolve(res.statusCode ?? -1);
        });
      },
    );
    req.on('error', () => {
      clearTimeout(timer);
      resolve(-1);
    });
    req.end(body);
  });
}

/**
 * A handler's work, counting how many run at once. The work lasts until `open()`, so the
 * slots are held while every other request is answered, however slow the machine.
 */
function meter() {
  let open = () => {};
  const gate = new Promise<void>((r) => {
    open = r;
  });
  const m = {
    running: 0,
    most: 0,
    open,
    async work() {
      m.running++;
      m.most = Math.max(m.most, m.running);
      await gate;
      m.running--;
    },
  };
  return m;
}

const count = (statuses: number[], s: number) => statuses.filter((x) => x === s).length;

/**
 * Sends `n` POSTs; once all but the `held` ones are answered (refused while the slots are
 * held), lets the held work finish; resolves every status. Had a slot been given back early,
 * more would run and fewer be answered: the wait fails instead.
 */
async function burst(port: number, m: ReturnType<typeof meter>, n: number, held: number): Promise<number[]> {
  let answered = 0;
  const all = Array.from({ length: n }, () =>
    post(port).then((s) => {
      answered++;
      return s;
    }),
  );
  await vi.waitFor(() => expect(answered).toBe(n - held), { timeout: HUNG_MS, interval: 20 });
  m.open();
  return Promise.all(all);
}

describe('a request whose body was read is still there (bug: its close released the slot or dropped the request)', () => {
  it('Express: concurrency before express.json() holds the slot until the response (bug: 10 of 10 ran at once with max 2)', async () => {
    const m = meter();
    const app = express();
    app.use(expressConcurrency({ max: 2, key: constant('k') }));
    app.use(express.json());
    app.post('/', async (_req, res) => {
      await m.work();
      res.end('ok');
    });
    const port = await listen(app);
    const statuses = await burst(port, m, 10, 2);
    expect(m.most).toBe(2);
    expect(count(statuses, 200)).toBe(2);
    expect(count(statuses, 429)).toBe(8);
    // Every slot is back: two more run.
    expect(await Promise.all([post(port), post(port)])).toEqual([200, 200]);
  });

  it('Express: concurrency after express.json() answers every request (bug: none was answered)', async () => {
    const m = meter();
    const app = express();
    app.use(express.json());
    app.use(expressConcurrency({ max: 2, key: constant('k') }));
    app.post('/', async (_req, res) => {
      await m.work();
      res.end('ok');
    });
    const port = await listen(app);
    const statuses = await burst(port, m, 6, 2);
    expect(count(statuses, 200)).toBe(2);
    expect(count(statuses, 429)).toBe(4);
    expect(m.most).toBe(2);
  });

  it('Express: a leaky-bucket queue after express.json() lets the queued requests through (bug: none was answered)', async () => {
    const app = express();
    app.use(express.json());
    app.use(
      expressRateLimit({
        rules: [{ name: 'q', key: constant('k'), algorithm: 'leaky-bucket', mode: 'queue', limit: 20, window: '1s', queue: 10 }],
      }),
    );
    app.post('/', (_req, res) => {
      res.end('ok');
    });
    const port = await listen(app);
    expect(await Promise.all(Array.from({ length: 4 }, () => post(port)))).toEqual([200, 200, 200, 200]);
  });

  it('Express: a client that hangs up after its body was read still gives its slot back', async () => {
    const app = express();
    app.use(expressConcurrency({ max: 2, key: constant('k') }));
    app.use(express.json());
    let closed = 0;
    app.post('/', async (_req, res) => {
      res.on('close', () => closed++);
      await new Promise((r) => setTimeout(r, 250));
      res.end('ok');
    });
    const port = await listen(app);
    const body = '{"a":1}';
    for (let i = 0; i < 2; i++) {
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
      });
      req.on('error', () => {});
      req.end(body);
      setTimeout(() => req.destroy(), 50);
    }
    // Both handlers are done (their responses closed, so the slots' release has run).
    await vi.waitFor(() => expect(closed).toBe(2), { timeout: HUNG_MS, interval: 20 });
    expect(await Promise.all([post(port), post(port)])).toEqual([200, 200]);
  });

  it('Fastify: the concurrency plugin holds the slot while the body is parsed and the handler runs (bug: 10 of 10 ran at once with max 2)', async () => {
    const m = meter();
    const app = Fastify();
    fastifies.push(app);
    await app.register(fastifyConcurrency, { max: 2, key: constant('k') });
    app.post('/', async () => {
      await m.work();
      return 'ok';
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    const statuses = await burst(port, m, 10, 2);
    expect(m.most).toBe(2);
    expect(count(statuses, 200)).toBe(2);
    expect(count(statuses, 429)).toBe(8);
  });

  it("Fastify: a leaky-bucket queue deciding in 'preHandler' (after the body is parsed) lets the queued requests through (bug: none was answered)", async () => {
    const app = Fastify();
    fastifies.push(app);
    await app.register(tollgate, {
      hook: 'preHandler',
      rules: [{ name: 'q', key: constant('k'), algorithm: 'leaky-bucket', mode: 'queue', limit: 20, window: '1s', queue: 10 }],
    });
    app.post('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    expect(await Promise.all(Array.from({ length: 4 }, () => post(port)))).toEqual([200, 200, 200, 200]);
  });

  it('node:http: a handler that reads the body before its work keeps the slot (bug: 10 of 10 ran at once with max 2)', async () => {
    const m = meter();
    const limit = nodeConcurrency({ max: 2, key: constant('k') });
    const port = await listen(async (req, res) => {
      if (!(await limit(req, res))) return;
      for await (const _chunk of req) {
        // read the body to its end, as a body parser does
      }
      await m.work();
      res.end('ok');
    });
    const statuses = await burst(port, m, 10, 2);
    expect(m.most).toBe(2);
    expect(count(statuses, 200)).toBe(2);
    expect(count(statuses, 429)).toBe(8);
  });
});
