/**
 * The control scenario app on a Koa major (see suite.ts for the contract): the stages mount
 * `slowDown`, `rateLimit`, `concurrency` and `shed` from @tollgate/koa as they are.
 */
import http from 'node:http';
import { concurrency, rateLimit, shed, slowDown } from '@tollgate/koa';
import Koa, { type Context, type Middleware } from 'koa';
import type { ControlAppSpec, ListeningControlApp, Stage } from './suite.js';

function mount(stage: Stage): { middleware: Middleware; close: () => unknown } {
  switch (stage.kind) {
    case 'slowDown': {
      const m = slowDown(stage.options as never);
      return { middleware: m, close: () => m.close() };
    }
    case 'rateLimit':
      return { middleware: rateLimit(stage.options as never), close: () => {} };
    case 'concurrency': {
      const m = concurrency(stage.options as never);
      return { middleware: m, close: () => m.close() };
    }
    case 'shed': {
      const m = shed(stage.options as never);
      return { middleware: m, close: () => m.close() };
    }
  }
}

/** Builds a control scenario app on a Koa major (3 by default; 2 through the `koa2` alias). */
export function koaControlApp(Application: typeof Koa = Koa) {
  return async function makeApp(spec: ControlAppSpec): Promise<ListeningControlApp> {
    const app = new Application();
    // A thrown handler error becomes Koa's plain 500; the scenarios check the status only.
    app.silent = true;
    const mounted = spec.stages.map(mount);
    for (const m of mounted) app.use(m.middleware);
    app.use(async (ctx: Context) => {
      spec.onStart(ctx.path, ctx);
      const body = () => ({ path: ctx.path, start: spec.clock.now(), rateLimit: ctx.state.rateLimit ?? null });
      const b = spec.behaviour(ctx.path);
      switch (b.kind) {
        case 'ok':
          ctx.body = body();
          return;
        case 'status':
          ctx.status = b.status;
          ctx.body = body();
          return;
        case 'slow':
          await new Promise<void>((resolve) => spec.timers.setTimeout(resolve, b.ms));
          ctx.body = body();
          return;
        case 'throw':
          throw new Error('handler failed');
        case 'stream': {
          // Koa writes a body it is given; a stream is written by hand, as Koa documents.
          ctx.respond = false;
          const res = ctx.res;
          res.statusCode = 200;
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
    const server = http.createServer(app.callback());
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
