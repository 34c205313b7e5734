/**
 * The scenario app on plain node:http (`makeApp` of the HTTP scenario suite): the
 * app-level limiter of @tollgate/node awaited first, then a route's own stage
 * (`limit.route({ rules })`) for routes with rules.
 */
import http from 'node:http';
import { rateLimit } from '@tollgate/node';
import { limiterOptions } from './app-options.js';
import type { AppSpec, ListeningApp } from './scenarios.js';

export async function nodeApp(spec: AppSpec): Promise<ListeningApp> {
  const limit = rateLimit(limiterOptions(spec));
  const routes = new Map(
    spec.routes.map((r) => [
      `${r.method} ${r.path}`,
      { mode: r.mode, stage: r.rules ? limit.route({ rules: r.rules as never, ...(r.mode ? { mode: r.mode } : {}) }) : null },
    ]),
  );
  const server = http.createServer({ maxHeaderSize: spec.maxHeaderSize }, async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const route = routes.get(`${req.method} ${path}`);
    if (route === undefined && path !== '/') {
      res.statusCode = 404;
      res.end();
      return;
    }
    // A route whose rules replace the app-level ones runs its own stage alone.
    if (route?.mode !== 'replace' && !(await limit(req, res))) return;
    if (route?.stage && !(await route.stage(req, res))) return;
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ route: path, rateLimit: req.rateLimit ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    update: (name, changes) => limit.update(name, changes),
  };
}
