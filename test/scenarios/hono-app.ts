/**
 * The scenario app on Hono 4 served by @hono/node-server (`makeApp` of the HTTP scenario
 * suite): the app-level limiter first, then a route's own middleware
 * (`limiter.route({ rules })`) for routes with rules. The client address is Node's
 * `getConnInfo`, passed as `connInfo`.
 *
 * The suite's functions read the request as `ScenarioRequest` (`req.headers`, the shape
 * Express', Fastify's and Node's requests have); a Hono `Context` has neither, so the app
 * gives each context that shape first (`scenarioShape`), and adapts the suite's
 * `(req, res, decision)` `onRejected` to Hono's `(c, decision)`.
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { type RateLimitEnv, rateLimit } from '@tollgate/hono';
import { Hono, type MiddlewareHandler } from 'hono';
import type { AppSpec, ListeningApp } from './scenarios.js';

/** `c.headers` (a plain record) and `c.url` (the path), as the shared suites' functions read a request. */
export const scenarioShape: MiddlewareHandler = async (c, next) => {
  Object.assign(c, { headers: Object.fromEntries(c.req.raw.headers), url: c.req.path });
  await next();
};

export async function honoApp(spec: AppSpec): Promise<ListeningApp> {
  const { onRejected, ...options } = spec.options ?? {};
  const limiter = rateLimit({
    rules: spec.rules as never,
    store: spec.store,
    clock: spec.clock,
    connInfo: getConnInfo,
    ...(spec.trustProxy !== undefined ? { trustProxy: spec.trustProxy } : {}),
    ...(spec.headers !== undefined ? { headers: spec.headers } : {}),
    ...(spec.dryRun !== undefined ? { dryRun: spec.dryRun } : {}),
    ...(spec.tiers !== undefined ? { tiers: spec.tiers as never, tier: spec.tier as never } : {}),
    ...(spec.allow !== undefined ? { allow: spec.allow as never } : {}),
    ...(spec.deny !== undefined ? { deny: spec.deny as never } : {}),
    ...(onRejected !== undefined ? { onRejected: (c, d) => onRejected(c as never, c as never, d) } : {}),
    ...(options as object),
  });
  const app = new Hono<RateLimitEnv>();
  app.use(scenarioShape);
  const answer = (path: string) => (c: { get(k: 'rateLimit'): unknown; json(b: unknown): Response }) =>
    c.json({ route: path, rateLimit: c.get('rateLimit') ?? null });
  for (const route of spec.routes) {
    const own = route.rules ? [limiter.route({ rules: route.rules as never, ...(route.mode ? { mode: route.mode } : {}) })] : [];
    // A route whose rules replace the app-level ones runs its own middleware alone.
    const chain = route.mode === 'replace' ? own : [limiter, ...own];
    app.on([route.method], [route.path], ...(chain as []), answer(route.path));
  }
  app.get('/', limiter, answer('/'));
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1', serverOptions: { maxHeaderSize: spec.maxHeaderSize } }, () =>
      resolve(s as Server),
    );
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    update: (name, changes) => limiter.update(name, changes),
  };
}
