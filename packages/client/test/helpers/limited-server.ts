/**
 * A real tollgate-protected HTTP server on loopback for the client's acceptance tests:
 * node:http plus `createLimiter` from @tollgate/core on the test's (virtual) clock. It
 * answers refusals the way SPEC 7 describes — 429, `Retry-After` in whole seconds,
 * draft-10 `RateLimit` / `RateLimit-Policy` — and logs every request it sees with the
 * virtual time of its arrival.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Clock, createLimiter, type Decision, type Rule } from '@tollgate/core';

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
  rules?: Rule<IncomingMessage>[];
  /** Writes Retry-After for a refusal (default: whole seconds, SPEC 7.1). `undefined` omits it. */
  retryAfter?: (d: Decision, now: number) => string | undefined;
  /** Send draft-10 RateLimit / RateLimit-Policy headers. @default true */
  rateLimitHeaders?: boolean;
  /** Send a `Date` header (from the virtual clock). @default true */
  sendDate?: boolean;
  /** Runs before the limiter; return true when it answered (or parked) the request itself. */
  intercept?: (req: IncomingMessage, res: ServerResponse, n: number) => boolean;
}

export interface LimitedServer {
  url: string;
  log: Arrival[];
  server: Server;
  close(): Promise<void>;
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

export const clientKey = (req: IncomingMessage): string => String(req.headers['x-client'] ?? 'anonymous');

function rateLimitHeaders(res: ServerResponse, d: Decision, peek: Decision | undefined): void {
  res.setHeader('RateLimit-Policy', d.rules.map((r) => `"${r.name}";q=${r.limit};w=${Math.max(1, seconds(r.windowMs))}`).join(', '));
  const items = d.rules.map((r, i) => {
    let t: number;
    if (!r.allowed) t = r.retryAfterMs;
    else if (r.remaining === 0) t = peek?.rules[i]?.retryAfterMs ?? r.resetMs;
    else t = r.resetMs;
    return `"${r.name}";r=${r.remaining};t=${seconds(t)}`;
  });
  res.setHeader('RateLimit', items.join(', '));
}

export async function startLimitedServer(o: LimitedServerOptions): Promise<LimitedServer> {
  const limiter = o.rules ? createLimiter<IncomingMessage>({ rules: o.rules, clock: o.clock, defaultKey: clientKey }) : undefined;
  const log: Arrival[] = [];
  let n = 0;
  const server = createServer(async (req, res) => {
    const entry: Arrival = {
      at: o.clock.now(),
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      client: req.headers['x-client'] as string | undefined,
      idempotencyKey: req.headers['idempotency-key'] as string | undefined,
      status: 0,
    };
    log.push(entry);
    // The server's Date follows the virtual clock, like a real server's follows its own.
    if (o.sendDate === false) res.sendDate = false;
    else res.setHeader('Date', new Date(o.clock.now()).toUTCString());
    res.on('finish', () => {
      entry.status = res.statusCode;
    });
    if (o.intercept?.(req, res, n++)) return;
    if (limiter) {
      const d = await limiter.consume(req);
      const exhausted = d.allowed && d.rules.some((r) => r.remaining === 0);
      if (o.rateLimitHeaders !== false) rateLimitHeaders(res, d, exhausted ? await limiter.peek(req) : undefined);
      if (!d.allowed) {
        const ra = o.retryAfter ? o.retryAfter(d, o.clock.now()) : String(seconds(d.retryAfterMs));
        if (ra !== undefined) res.setHeader('Retry-After', ra);
        res.setHeader('Cache-Control', 'no-store');
        res.statusCode = 429;
        res.setHeader('Content-Type', 'application/problem+json');
        res.end(JSON.stringify({ title: 'Too Many Requests', status: 429, 'violated-policies': d.rejectedBy }));
        return;
      }
    }
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
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
