/**
 * Misconfiguration warnings on every port (docs/errors.md, "Process warnings"): once per
 * process, as a process warning and on the `tollgate:warning` channel.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import { resetProxyWarnings } from '@tollgate/core/http';
import { rateLimit } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { rateLimit as koaRateLimit } from '@tollgate/koa';
import { rateLimit as nodeRateLimit } from '@tollgate/node';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { send } from '../setup/http.js';

const rules = [{ name: 'ip', limit: 100, window: '1m' as const }];
type Started = { port: number; close(): Promise<void> };

const ports: Record<string, () => Promise<Started>> = {
  express: async () => {
    const app = express();
    app.use(rateLimit({ rules }));
    app.get('/', (_req, res) => res.send('ok'));
    return listen(http.createServer(app));
  },
  fastify: async () => {
    const app = Fastify();
    await app.register(tollgate, { rules });
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: (app.server.address() as { port: number }).port, close: () => app.close() };
  },
  node: async () => {
    const limit = nodeRateLimit({ rules });
    return listen(
      http.createServer(async (req, res) => {
        if (await limit(req, res)) res.end('ok');
      }),
    );
  },
  koa: async () => {
    const app = new Koa();
    app.use(koaRateLimit({ rules }));
    app.use((ctx) => {
      ctx.body = 'ok';
    });
    return listen(http.createServer(app.callback()));
  },
};

async function listen(server: http.Server): Promise<Started> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, close: () => new Promise((r) => server.close(() => r())) };
}

const seen: Array<{ code: string; adapter: string }> = [];
const onWarning = (m: unknown) => seen.push(m as (typeof seen)[number]);
const processWarnings: string[] = [];
const onProcessWarning = (w: Error & { code?: string }) => {
  if (w.name === 'TollgateWarning' && w.code) processWarnings.push(w.code);
};

beforeEach(() => {
  resetProxyWarnings();
  seen.length = 0;
  processWarnings.length = 0;
  diagnosticsChannel.subscribe('tollgate:warning', onWarning);
  process.on('warning', onProcessWarning);
});
afterEach(() => {
  diagnosticsChannel.unsubscribe('tollgate:warning', onWarning);
  process.off('warning', onProcessWarning);
});

describe('misconfiguration warnings', () => {
  for (const [name, start] of Object.entries(ports)) {
    it(`${name}: X-Forwarded-For from a loopback peer while no proxy is trusted warns once`, async () => {
      const app = await start();
      try {
        await send(app.port).reply;
        expect(seen).toEqual([]);
        for (let i = 0; i < 3; i++) await send(app.port, { headers: { 'x-forwarded-for': '203.0.113.9' } }).reply;
        await new Promise((r) => setImmediate(r));
        expect(seen).toEqual([expect.objectContaining({ code: 'TOLLGATE_FORWARDED_UNTRUSTED', adapter: name })]);
        expect(processWarnings).toEqual(['TOLLGATE_FORWARDED_UNTRUSTED']);
      } finally {
        await app.close();
      }
    });
  }

  it("express: 'trust proxy' set while tollgate's trustProxy is not warns once", async () => {
    const app = express();
    app.set('trust proxy', 'loopback');
    app.use(rateLimit({ rules }));
    app.get('/', (_req, res) => res.send('ok'));
    const started = await listen(http.createServer(app));
    try {
      await send(started.port).reply;
      await send(started.port).reply;
      await new Promise((r) => setImmediate(r));
      expect(seen.map((m) => m.code)).toEqual(['TOLLGATE_TRUST_PROXY_UNSET']);
    } finally {
      await started.close();
    }
  });

  it("koa: app.proxy set while tollgate's trustProxy is not warns once", async () => {
    const app = new Koa();
    app.proxy = true;
    app.use(koaRateLimit({ rules }));
    app.use((ctx) => {
      ctx.body = 'ok';
    });
    const started = await listen(http.createServer(app.callback()));
    try {
      await send(started.port).reply;
      await send(started.port).reply;
      await new Promise((r) => setImmediate(r));
      expect(seen).toEqual([expect.objectContaining({ code: 'TOLLGATE_TRUST_PROXY_UNSET', adapter: 'koa' })]);
    } finally {
      await started.close();
    }
  });

  it('no warning when trustProxy names the proxy', async () => {
    const app = express();
    app.set('trust proxy', 'loopback');
    app.use(rateLimit({ rules, trustProxy: 'loopback' }));
    app.get('/', (_req, res) => res.send('ok'));
    const started = await listen(http.createServer(app));
    try {
      await send(started.port, { headers: { 'x-forwarded-for': '203.0.113.9' } }).reply;
      expect(seen).toEqual([]);
    } finally {
      await started.close();
    }
  });
});
