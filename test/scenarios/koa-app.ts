/**
 * The scenario app on a Koa major (`makeApp` of the HTTP scenario suite): the app-level limiter
 * through `app.use(rateLimit())`, route rules through `limiter.route()` on @koa/router.
 * Routes whose rules replace the app-level ones are on a router mounted before the
 * limiter, as docs/koa.md says. Shared by the memory and Redis runs.
 */
import http from 'node:http';
import Router from '@koa/router';
import { type Decision, rateLimit } from '@tollgate/koa';
import Koa, { type Context } from 'koa';
import type { AppSpec, ListeningApp } from './scenarios.js';

/** Builds the scenario app on a Koa major (3 by default; 2 through the `koa2` alias). */
export function koaApp(Application: typeof Koa = Koa) {
  return async function makeApp(spec: AppSpec): Promise<ListeningApp> {
    const app = new Application();
    // Errors are answered by Koa (500); the scenarios check the status, not the log.
    app.silent = true;
    const limiter = rateLimit({
      rules: spec.rules as never,
      store: spec.store,
      clock: spec.clock,
      ...(spec.trustProxy !== undefined ? { trustProxy: spec.trustProxy } : {}),
      ...(spec.headers !== undefined ? { headers: spec.headers } : {}),
      ...(spec.dryRun !== undefined ? { dryRun: spec.dryRun } : {}),
      ...(spec.tiers !== undefined ? { tiers: spec.tiers as never, tier: spec.tier as never } : {}),
      ...(spec.allow !== undefined ? { allow: spec.allow as never } : {}),
      ...(spec.deny !== undefined ? { deny: spec.deny as never } : {}),
      ...(spec.options as object),
      // Koa's callbacks take the context once: the suite's (req, res, decision) is (ctx, decision).
      ...(spec.options?.onRejected
        ? { onRejected: (ctx: Context, d: Decision) => spec.options?.onRejected?.(ctx as never, ctx as never, d) }
        : {}),
    });
    const answer = (path: string) => (ctx: Context) => {
      ctx.body = { route: path, rateLimit: ctx.state.rateLimit ?? null };
    };
    const before = new Router();
    const after = new Router();
    for (const route of spec.routes) {
      const router = route.mode === 'replace' ? before : after;
      const stage = route.rules ? [limiter.route({ rules: route.rules as never, ...(route.mode ? { mode: route.mode } : {}) })] : [];
      if (route.method === 'GET') router.get(route.path, ...stage, answer(route.path));
      else router.post(route.path, ...stage, answer(route.path));
    }
    after.get('/', answer('/'));
    app.use(before.routes());
    app.use(limiter);
    app.use(after.routes());
    const server = http.createServer({ maxHeaderSize: spec.maxHeaderSize }, app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      port: (server.address() as { port: number }).port,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
      update: (name, changes) => limiter.update(name, changes),
    };
  };
}
