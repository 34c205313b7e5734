/**
 * A real tollgate-protected HTTP server on loopback for the client's acceptance tests:
 * an Express app with `rateLimit` from @tollgate/express, its limiter on the test's
 * (virtual) clock. Refusals are what the adapter writes (SPEC 7: 429, `Retry-After` in
 * whole seconds, draft-10 `RateLimit` / `RateLimit-Policy`) unless a test asks for
 * another `Retry-After`. Every request is logged with the virtual time of its arrival.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock, Decision } from '@tollgate/core';
import { type Rule, rateLimit } from '@tollgate/express';
import express, { type Request, type Response } from 'express';

export interface Arrival {
  at: number;
  method: string;
  path: string;
  /** `x-client` header: which test client sent it. */
  client: string | undefined;
  idempotencyKey: string | undefined;
  status: number;
}

export interface LimitedServerOptions {
  clock: Clock;
  /** The stack; none means every request is answered 200. */
  rules?: Rule[];
  /** Replaces the adapter's Retry-After on a refusal; returning `undefined` removes it. */
  retryAfter?: (d: Decision, now: number) => string | undefined;
  /** Send draft-10 RateLimit / RateLimit-Policy headers. @default true */
  rateLimitHeaders?: boolean;
  /** Send a `Date` header (from the virtual clock). @default true */
  sendDate?: boolean;
  /** Runs before the limiter; return true when it answered (or parked) the request itself. */
  intercept?: (req: Request, res: Response, n: number) => boolean;
}

export interface LimitedServer {
  url: string;
  log: Arrival[];
  server: Server;
  close(): Promise<void>;
}

export async function startLimitedServer(o: LimitedServerOptions): Promise<LimitedServer> {
  const log: Arrival[] = [];
  let n = 0;
  const app = express();
  app.use((req, res, next) => {
    const entry: Arrival = {
      at: o.clock.now(),
      method: req.method,
      path: req.url,
      client: req.get('x-client'),
      idempotencyKey: req.get('idempotency-key'),
      status: 0,
    };
    log.push(entry);
    res.on('finish', () => {
      entry.status = res.statusCode;
    });
    // The server's Date follows the virtual clock, like a real server's follows its own.
    if (o.sendDate === false) res.sendDate = false;
    else res.setHeader('Date', new Date(o.clock.now()).toUTCString());
    if (!o.intercept?.(req, res, n++)) next();
  });
  if (o.rules) {
    const { retryAfter } = o;
    app.use(
      rateLimit({
        rules: o.rules,
        clock: o.clock,
        headers: o.rateLimitHeaders === false ? false : 'draft-10',
        ...(retryAfter && {
          handler: (_req: Request, res: Response, _next: unknown, d: Decision) => {
            const value = retryAfter(d, o.clock.now());
            if (value === undefined) res.removeHeader('Retry-After');
            else res.setHeader('Retry-After', value);
            res.end('slow down');
          },
        }),
      }),
    );
  }
  app.use((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A tiny seeded PRNG (mulberry32) so jitter tests are deterministic. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
