/**
 * The control scenario app on Hono 4 served by @hono/node-server (see suite.ts for the
 * contract): the stages mount `slowDown`, `rateLimit`, `concurrency` and `shed` from
 * @tollgate/hono with Node's `getConnInfo` as `connInfo`; the context is given the
 * suite's request shape first (`scenarioShape`, see ../scenarios/hono-app.ts).
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { concurrency, type RateLimitEnv, rateLimit, shed, slowDown } from '@tollgate/hono';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { scenarioShape } from '../scenarios/hono-app.js';
import type { ControlAppSpec, ListeningControlApp, Stage } from './suite.js';

function mount(stage: Stage): { handler: MiddlewareHandler; close: () => unknown } {
  const connInfo = getConnInfo;
  switch (stage.kind) {
    case 'slowDown': {
      const m = slowDown({ ...(stage.options as object), connInfo } as never);
      return { handler: m, close: () => m.close() };
    }
    case 'rateLimit': {
      const m = rateLimit({ ...(stage.options as object), connInfo } as never);
      return { handler: m, close: () => {} };
    }
    case 'concurrency': {
      const m = concurrency({ ...(stage.options as object), connInfo } as never);
      return { handler: m, close: () => m.close() };
    }
    case 'shed': {
      const m = shed(stage.options as never);
      return { handler: m, close: () => m.close() };
    }
  }
}

export async function honoControlApp(spec: ControlAppSpec): Promise<ListeningControlApp> {
  const app = new Hono<RateLimitEnv>();
  const mounted = spec.stages.map(mount);
  app.use(scenarioShape);
  for (const m of mounted) app.use(m.handler);
  app.all('*', async (c: Context<RateLimitEnv>) => {
    const path = c.req.path;
    spec.onStart(path, c as never);
    const body = () => ({ path, start: spec.clock.now(), rateLimit: c.get('rateLimit') ?? null });
    const b = spec.behaviour(path);
    switch (b.kind) {
      case 'ok':
        return c.json(body());
      case 'status':
        return c.json(body(), b.status as 200);
      case 'slow':
        await new Promise((resolve) => spec.timers.setTimeout(() => resolve(undefined), b.ms));
        return c.json(body());
      case 'throw':
        throw new Error('handler failed');
      case 'stream': {
        let i = 0;
        const encoder = new TextEncoder();
        const stream = new ReadableStream<Uint8Array>({
          start(ctrl) {
            const tick = () => {
              ctrl.enqueue(encoder.encode(`chunk${i++}`));
              if (i < b.chunks) spec.timers.setTimeout(tick, b.everyMs);
              else ctrl.close();
            };
            tick();
          },
        });
        return c.body(stream);
      }
    }
  });
  // Quiet error handler: a thrown handler error becomes a plain 500.
  app.onError((_err, c) => c.text('error', 500));
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const m of mounted) await m.close();
    },
  };
}
