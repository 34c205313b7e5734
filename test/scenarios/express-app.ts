/**
 * Builds the scenario app (test/scenarios/scenarios.ts, AppSpec) on an Express major:
 * app-level rules through rateLimit(), route rules through limiter.route().
 */
import http from 'node:http';
import { rateLimit } from '@tollgate/express';
import type express5 from 'express';
import { limiterOptions } from './app-options.js';
import type { AppSpec, ListeningApp } from './scenarios.js';

export type ExpressFactory = typeof express5;

export function expressApp(express: ExpressFactory) {
  return async function makeApp(spec: AppSpec): Promise<ListeningApp> {
    const app = express();
    const limiter = rateLimit(limiterOptions(spec));
    const answer = (path: string) => (req: express5.Request, res: express5.Response) => {
      res.json({ route: path, rateLimit: req.rateLimit ?? null });
    };
    const mount = (route: AppSpec['routes'][number]) => {
      const stage = route.rules ? [limiter.route({ rules: route.rules as never, ...(route.mode ? { mode: route.mode } : {}) })] : [];
      const handlers = [...stage, answer(route.path)];
      if (route.method === 'GET') app.get(route.path, ...handlers);
      else app.post(route.path, ...handlers);
    };
    // A route whose rules replace the app-level ones is declared before app.use(limiter).
    for (const route of spec.routes) if (route.mode === 'replace') mount(route);
    app.use(limiter);
    for (const route of spec.routes) if (route.mode !== 'replace') mount(route);
    app.get('/', answer('/'));
    const server = http.createServer({ maxHeaderSize: spec.maxHeaderSize }, app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      port: (server.address() as { port: number }).port,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      update: (name, changes) => limiter.update(name, changes),
    };
  };
}
