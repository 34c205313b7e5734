/**
 * The shaping scenarios (limitRate) on hono (Web stream bodies, on @hono/node-server), and
 * what only Hono has: a handler whose throw is not an Error rejects `next()` itself.
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { limitRate } from '@tollgate/hono';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { until } from '../controls/http.js';
import { honoShapingApp } from './apps.js';
import { download } from './client.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('hono', honoShapingApp);

describe('limitRate on Hono', () => {
  it('frees the key when the handler throws something other than an Error (next() rejects)', async () => {
    const pace = limitRate({ rate: '400KB/s', burst: '100KB', connInfo: getConnInfo });
    const app = new Hono();
    app.use(pace);
    app.get('/', () => {
      throw 'not an Error';
    });
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
    });
    try {
      const d = await download((server.address() as { port: number }).port, '/');
      expect(d.status).toBe(500);
      await until(() => pace.limit.active.responses === 0 && pace.limit.active.keys === 0, 'the key freed');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await pace.close();
    }
  });
});
