/**
 * Two limiters on one request whose rules share a name: the draft-10 fields name each
 * policy once (the name ties a `RateLimit` item to its `RateLimit-Policy` item), with the
 * later limiter's figures; rules of other names keep their items, in order.
 */
import http from 'node:http';
import type net from 'node:net';
import { constant } from '@tollgate/core';
import * as tgExpress from '@tollgate/express';
import * as tgNode from '@tollgate/node';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from '../setup/http.js';

const first = [
  { name: 'ip', key: constant('a'), limit: 100, window: '1m' as const },
  { name: 'tenant', key: constant('t'), limit: 1000, window: '1h' as const },
];
const second = [
  { name: 'ip', key: constant('b'), limit: 5, window: '10s' as const },
  { name: 'login', key: constant('l'), limit: 3, window: '15m' as const },
];

const open: http.Server[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

async function listen(server: http.Server): Promise<number> {
  open.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

const apps: Record<string, () => Promise<number>> = {
  async express() {
    const app = express();
    app.use(tgExpress.rateLimit({ rules: first }));
    app.use(tgExpress.rateLimit({ rules: second }));
    app.use((_req, res) => {
      res.end('ok');
    });
    return listen(http.createServer(app));
  },
  async node() {
    const a = tgNode.rateLimit({ rules: first });
    const b = tgNode.rateLimit({ rules: second });
    return listen(
      http.createServer(async (req, res) => {
        if ((await a(req, res)) && (await b(req, res))) res.end('ok');
      }),
    );
  },
};

describe('two limiters on one request, one rule name in both', () => {
  for (const [name, make] of Object.entries(apps)) {
    it(`${name}: the name appears once in each field, with the later limiter's figures`, async () => {
      const port = await make();
      const r = await send(port).reply;
      expect(r.status).toBe(200);
      expect(r.headers['ratelimit-policy']).toBe('"tenant";q=1000;w=3600, "ip";q=5;w=10, "login";q=3;w=900');
      // `t` depends on the algorithm's refill; the items and what remains are the point here.
      expect(String(r.headers.ratelimit).replace(/;t=\d+/g, '')).toBe('"tenant";r=999, "ip";r=4, "login";r=2');
    });
  }
});
