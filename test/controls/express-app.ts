/**
 * The control scenario app on Express (see suite.ts for the contract): the stages mount
 * `slowDown`, `rateLimit`, `concurrency` and `shed` from @tollgate/express as they are.
 */
import http from 'node:http';
import { concurrency, rateLimit, shed, slowDown } from '@tollgate/express';
import type express5 from 'express';
import type { ControlAppSpec, ListeningControlApp, Stage } from './suite.js';

export type ExpressFactory = typeof express5;

function mount(stage: Stage): { handler: express5.RequestHandler; close: () => unknown } {
  switch (stage.kind) {
    case 'slowDown': {
      const m = slowDown(stage.options as never);
      return { handler: m, close: () => m.close() };
    }
    case 'rateLimit': {
      const m = rateLimit(stage.options as never);
      return { handler: m, close: () => {} };
    }
    case 'concurrency': {
      const m = concurrency(stage.options as never);
      return { handler: m, close: () => m.close() };
    }
    case 'shed': {
      const m = shed(stage.options as never);
      return { handler: m, close: () => m.close() };
    }
  }
}

/** Builds a control scenario app on an Express major. Exported for the Redis run. */
export function expressControlApp(express: ExpressFactory) {
  return async function makeApp(spec: ControlAppSpec): Promise<ListeningControlApp> {
    const app = express();
    const mounted = spec.stages.map(mount);
    for (const m of mounted) app.use(m.handler);
    app.use((req: express5.Request, res: express5.Response) => {
      spec.onStart(req.path, req);
      const body = () => ({ path: req.path, start: spec.clock.now(), rateLimit: req.rateLimit ?? null });
      const b = spec.behaviour(req.path);
      switch (b.kind) {
        case 'ok':
          res.json(body());
          return;
        case 'status':
          res.status(b.status).json(body());
          return;
        case 'slow':
          spec.timers.setTimeout(() => res.json(body()), b.ms);
          return;
        case 'throw':
          throw new Error('handler failed');
        case 'stream': {
          let i = 0;
          const tick = () => {
            res.write(`chunk${i++}`);
            if (i < b.chunks) spec.timers.setTimeout(tick, b.everyMs);
            else res.end();
          };
          tick();
          return;
        }
      }
    });
    // Quiet error handler: a thrown handler error becomes a plain 500.
    app.use((_err: unknown, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
      res.status(500).end('error');
    });
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      port: (server.address() as { port: number }).port,
      async close() {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        for (const m of mounted) await m.close();
      },
    };
  };
}
