/**
 * A real proxy in front (issue 9, item 5; SPEC 5): Debian's nginx on loopback, appending the
 * peer address to `X-Forwarded-For` (`$proxy_add_x_forwarded_for`) and connecting to the
 * apps from 127.0.0.1. Clients bind to 127.0.0.2 and 127.0.0.3, so nginx sees two
 * different clients. Each case runs on Express and on Fastify with a limit of 3, and the
 * key is observed through the limit itself: who shares a budget with whom.
 *
 * - `trustProxy: '127.0.0.1'` (nginx's own address): the key is the client nginx saw, and
 *   a spoofed `X-Forwarded-For` from the client changes nothing.
 * - `trustProxy: 'loopback'`: the key is still the client nginx saw, but these clients
 *   are themselves inside the trusted range (127.0.0.0/8), so the walk goes past them into
 *   whatever they wrote. This is the documented reason to trust proxies by address.
 * - no trust: every request arrives from nginx, so all share nginx's key.
 *
 * Skipped with a message only when nginx is not installed; `.ci/run` installs it.
 */
import http from 'node:http';
import { ManualClock } from '@tollgate/core';
import { MemoryStore, rateLimit } from '@tollgate/express';
import { tollgate } from '@tollgate/fastify';
import express from 'express';
import fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx, type Nginx, startNginx } from '../setup/nginx.js';

const nginxBin = findNginx();
if (!nginxBin) console.warn('[nginx] SKIPPED: nginx not found (apt-get install -y nginx); the real-proxy tests did not run');

type Trust = '127.0.0.1' | 'loopback' | false;
const CASES: Trust[] = ['127.0.0.1', 'loopback', false];
const FRAMEWORKS = ['express', 'fastify'] as const;
const LIMIT = 3;

const closers: (() => Promise<unknown>)[] = [];
let nginx: Nginx | undefined;
/** `${framework}:${trust}` → nginx port in front of that app. */
const front = new Map<string, number>();

async function startApp(framework: (typeof FRAMEWORKS)[number], trust: Trust): Promise<number> {
  const rules = [{ name: 'ip', limit: LIMIT, window: '1h' as const }];
  // A still clock: a client's requests fall in one window wherever an hour ends.
  const opts = { rules, store: new MemoryStore(), clock: new ManualClock(0), ...(trust === false ? {} : { trustProxy: trust }) };
  if (framework === 'express') {
    const app = express();
    app.use(rateLimit(opts));
    app.use((_req, res) => {
      res.end('ok');
    });
    const server = http.createServer(app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });
    return (server.address() as { port: number }).port;
  }
  const app = fastify();
  await app.register(tollgate, opts);
  app.all('/*', async () => 'ok');
  await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close());
  return (app.server.address() as { port: number }).port;
}

beforeAll(async () => {
  if (!nginxBin) return;
  const keys: string[] = [];
  const upstreams: number[] = [];
  for (const framework of FRAMEWORKS) {
    for (const trust of CASES) {
      keys.push(`${framework}:${trust}`);
      upstreams.push(await startApp(framework, trust));
    }
  }
  nginx = await startNginx(upstreams);
  for (const [i, k] of keys.entries()) front.set(k, nginx.ports[i] as number);
});

afterAll(async () => {
  await nginx?.stop();
  for (const close of closers) await close();
});

/** One request through nginx from `from` (a loopback address); resolves with the status. */
function get(port: number, from: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', localAddress: from, agent: false, headers }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.end();
  });
}

async function times(n: number, port: number, from: string, headers?: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await get(port, from, headers));
  return out;
}

describe.skipIf(!nginxBin).each(FRAMEWORKS)('%s behind nginx', (framework) => {
  it("trustProxy '127.0.0.1' (nginx): keys on the client nginx saw; a spoofed X-Forwarded-For changes nothing", async () => {
    const port = front.get(`${framework}:127.0.0.1`) as number;
    expect(await times(LIMIT, port, '127.0.0.2')).toEqual([200, 200, 200]);
    // Another client has its own budget.
    expect(await get(port, '127.0.0.3')).toBe(200);
    // 127.0.0.2 is out of budget whatever it claims to be.
    for (const spoof of ['9.9.9.9', '127.0.0.3', '9.9.9.9, 8.8.8.8', 'unknown', '::1']) {
      expect(await get(port, '127.0.0.2', { 'X-Forwarded-For': spoof }), spoof).toBe(429);
    }
    expect(await get(port, '127.0.0.3', { 'X-Forwarded-For': '9.9.9.9' })).toBe(200);
  });

  it("trustProxy 'loopback': keys on the client nginx saw — but a client inside the trusted range can name another key", async () => {
    const port = front.get(`${framework}:loopback`) as number;
    expect(await times(LIMIT, port, '127.0.0.2')).toEqual([200, 200, 200]);
    expect(await get(port, '127.0.0.3')).toBe(200);
    expect(await get(port, '127.0.0.2')).toBe(429);
    // 127.0.0.2 is itself "a proxy of ours" under 'loopback', so the walk continues into
    // what it wrote: a fresh key. Real clients are not on loopback; see docs/reliability.md.
    expect(await get(port, '127.0.0.2', { 'X-Forwarded-For': '9.9.9.9' })).toBe(200);
  });

  it('no trust: every request comes from nginx, so all clients share one key', async () => {
    const port = front.get(`${framework}:false`) as number;
    expect(await times(LIMIT, port, '127.0.0.2')).toEqual([200, 200, 200]);
    expect(await get(port, '127.0.0.3')).toBe(429);
    expect(await get(port, '127.0.0.3', { 'X-Forwarded-For': '9.9.9.9' })).toBe(429);
  });
});
