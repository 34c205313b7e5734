/**
 * The control scenario app on NestJS, on either platform (see suite.ts for the contract):
 * `shed`, `slowDown` and `concurrency` from @tollgate/nestjs in order as Nest middleware
 * (`consumer.apply` on Express, `app.use` on Fastify); a `rateLimit` stage is `TollgateModule.forRoot` with a global `TollgateGuard`,
 * which Nest runs after every middleware (the suite puts it last).
 */
import type http from 'node:http';
import { PassThrough } from 'node:stream';
import { All, Controller, type MiddlewareConsumer, Module, Req, Res, StreamableFile } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { concurrency, shed, slowDown, TollgateGuard, TollgateModule } from '@tollgate/nestjs';
import type { ControlAppSpec, ListeningControlApp, Stage } from './suite.js';

export type Platform = 'express' | 'fastify';

type Mounted = { use: (req: never, res: never, next: never) => void; close: () => unknown };

function mount(stage: Exclude<Stage, { kind: 'rateLimit' }>): Mounted {
  switch (stage.kind) {
    case 'slowDown': {
      const m = slowDown(stage.options as never);
      return { use: m, close: () => m.close() };
    }
    case 'concurrency': {
      const m = concurrency(stage.options as never);
      return { use: m, close: () => m.close() };
    }
    case 'shed': {
      const m = shed(stage.options as never);
      return { use: m, close: () => m.close() };
    }
  }
}

// biome-ignore lint/suspicious/noExplicitAny: Express' or Fastify's request and response
type Any = any;

/** Builds a control scenario app on Nest's `platform`. */
export function nestControlApp(platform: Platform) {
  return async function makeApp(spec: ControlAppSpec): Promise<ListeningControlApp> {
    const limiter = spec.stages.find((s) => s.kind === 'rateLimit');
    const mounted = spec.stages.filter((s) => s.kind !== 'rateLimit').map(mount);

    @Controller()
    class ScenarioController {
      // Fastify's router and Express' path-to-regexp write the catch-all differently.
      @All(platform === 'fastify' ? ['/', '*'] : ['/', '{*path}'])
      answer(@Req() req: Any, @Res({ passthrough: true }) res: Any) {
        const path = new URL(req.url, 'http://localhost').pathname;
        spec.onStart(path, req);
        const body = () => ({ path, start: spec.clock.now(), rateLimit: req.rateLimit ?? null });
        const b = spec.behaviour(path);
        switch (b.kind) {
          case 'ok':
            res.status(200);
            return body();
          case 'status':
            res.status(b.status);
            return body();
          case 'slow':
            res.status(200);
            return new Promise((resolve) => spec.timers.setTimeout(() => resolve(body()), b.ms));
          case 'throw':
            throw new Error('handler failed');
          case 'stream': {
            const stream = new PassThrough();
            let i = 0;
            const tick = () => {
              stream.write(`chunk${i++}`);
              if (i < b.chunks) spec.timers.setTimeout(tick, b.everyMs);
              else stream.end();
            };
            tick();
            res.status(200);
            return new StreamableFile(stream, { type: 'text/plain' });
          }
        }
      }
    }

    class AppModule {
      configure(consumer: MiddlewareConsumer) {
        if (platform === 'express' && mounted.length > 0)
          consumer.apply(...mounted.map((m) => m.use as (...args: Any[]) => void)).forRoutes(ScenarioController);
      }
    }
    Module({
      imports: limiter ? [TollgateModule.forRoot(limiter.options as never)] : [],
      controllers: [ScenarioController],
      providers: limiter ? [{ provide: APP_GUARD, useClass: TollgateGuard }] : [],
    })(AppModule);

    const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
    const app = await NestFactory.create(AppModule, adapter, { logger: false, abortOnError: false });
    // On Fastify, middleware applied through the consumer sees `req.url` without the path it
    // matched (middie's way); the suite's callbacks read `req.url`, so there it goes through `app.use`.
    if (platform === 'fastify') for (const m of mounted) app.use(m.use);
    await app.listen(0, '127.0.0.1');
    const server = app.getHttpServer() as http.Server;
    return {
      port: (server.address() as { port: number }).port,
      async close() {
        server.closeAllConnections();
        await app.close();
        for (const m of mounted) await m.close();
      },
    };
  };
}
