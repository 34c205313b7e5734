/**
 * The HTTP scenario suite on Express 5 and Express 4 with the memory store.
 */
import http from 'node:http';
import { rateLimit } from '@tollgate/express';
import express5 from 'express';
import express4 from 'express4';
import { type AppSpec, httpScenarios, type ListeningApp } from './scenarios.js';

type ExpressFactory = typeof express5;

/** Builds the scenario app on an Express major. Exported for the Redis run. */
export function expressApp(express: ExpressFactory) {
  return async function makeApp(spec: AppSpec): Promise<ListeningApp> {
    const app = express();
    const limiter = rateLimit({
      rules: spec.rules as never,
      store: spec.store,
      clock: spec.clock,
      ...(spec.trustProxy !== undefined ? { trustProxy: spec.trustProxy } : {}),
      ...(spec.headers !== undefined ? { headers: spec.headers } : {}),
      ...(spec.dryRun !== undefined ? { dryRun: spec.dryRun } : {}),
    });
    app.use(limiter);
    const answer = (path: string) => (req: express5.Request, res: express5.Response) => {
      res.json({ route: path, rateLimit: req.rateLimit ?? null });
    };
    for (const route of spec.routes) {
      const handlers = route.rules ? [limiter.route({ rules: route.rules as never }), answer(route.path)] : [answer(route.path)];
      if (route.method === 'GET') app.get(route.path, ...handlers);
      else app.post(route.path, ...handlers);
    }
    app.get('/', answer('/'));
    const server = http.createServer({ maxHeaderSize: spec.maxHeaderSize }, app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      port: (server.address() as { port: number }).port,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    };
  };
}

httpScenarios('Express 5, MemoryStore', expressApp(express5));
httpScenarios('Express 4, MemoryStore', expressApp(express4 as unknown as ExpressFactory));
