/**
 * The failing-callback suite (failing-callbacks.ts) on every port: one entry per port. A
 * port added later joins with one more entry.
 */
import http from 'node:http';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Catch, Controller, Get, type MiddlewareConsumer, Module } from '@nestjs/common';
import { APP_GUARD, HttpAdapterHost, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  concurrency as expressConcurrency,
  limitRate as expressLimitRate,
  rateLimit as expressRateLimit,
  shed as expressShed,
  slowDown as expressSlowDown,
} from '@tollgate/express';
import tollgate, {
  concurrency as fastifyConcurrency,
  limitRate as fastifyLimitRate,
  shed as fastifyShed,
  slowDown as fastifySlowDown,
} from '@tollgate/fastify';
import {
  concurrency as honoConcurrency,
  limitRate as honoLimitRate,
  rateLimit as honoRateLimit,
  shed as honoShed,
  slowDown as honoSlowDown,
} from '@tollgate/hono';
import {
  concurrency as koaConcurrency,
  limitRate as koaLimitRate,
  rateLimit as koaRateLimit,
  shed as koaShed,
  slowDown as koaSlowDown,
} from '@tollgate/koa';
import {
  concurrency as nestConcurrency,
  limitRate as nestLimitRate,
  shed as nestShed,
  slowDown as nestSlowDown,
  TollgateGuard,
  TollgateModule,
} from '@tollgate/nestjs';
import * as node from '@tollgate/node';
import express5 from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import { Hono, type MiddlewareHandler } from 'hono';
import Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { errorBody, type FailingApp, type FailingPort, type FailSpec, failingCallbackSuite } from './failing-callbacks.js';

async function listen(server: http.Server): Promise<FailingApp> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function expressPort(name: string, express: typeof express5): FailingPort {
  return {
    name,
    onError: false,
    makeApp(spec: FailSpec) {
      const app = express();
      const controls = { slowDown: expressSlowDown, concurrency: expressConcurrency, shed: expressShed, limitRate: expressLimitRate };
      if (spec.control) app.use(controls[spec.control.kind](spec.control.options as never));
      const { handler } = spec;
      app.use(
        expressRateLimit({
          ...(spec.rateLimit as object),
          ...(handler ? { handler: (req: unknown, _res: unknown, _next: unknown, d: never) => handler(req, d) } : {}),
        } as never),
      );
      app.get('/', (_req, res) => {
        res.json({ ok: true });
      });
      app.use((err: unknown, _req: express5.Request, res: express5.Response, _next: express5.NextFunction) => {
        if (spec.errorHandlerFails) throw new Error('error handler bug');
        res.status(500).json(errorBody(err));
      });
      return listen(http.createServer(app));
    },
  };
}

const fastifyPort: FailingPort = {
  name: 'Fastify',
  onError: false,
  async makeApp(spec) {
    const app = Fastify({ logger: false });
    const controls = { slowDown: fastifySlowDown, concurrency: fastifyConcurrency, shed: fastifyShed, limitRate: fastifyLimitRate };
    if (spec.control) await app.register(controls[spec.control.kind] as never, spec.control.options);
    const { handler } = spec;
    await app.register(tollgate, {
      ...(spec.rateLimit as object),
      ...(handler ? { handler: (req: unknown, _reply: unknown, d: never) => handler(req, d) } : {}),
    } as never);
    app.setErrorHandler((err, _request, reply) => {
      if (spec.errorHandlerFails) throw new Error('error handler bug');
      reply.code(500).send(errorBody(err));
    });
    app.get('/', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: (app.server.address() as { port: number }).port, close: () => app.close() };
  },
};

const nodeControls = { slowDown: node.slowDown, concurrency: node.concurrency, shed: node.shed, limitRate: node.limitRate };

function answerError(err: unknown, res: http.ServerResponse): void {
  res.statusCode = 500;
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify(errorBody(err)));
}

/** `await limit(req, res)`, with the app's onError answering 500 (or the spec's own onError). */
const nodeAsyncPort: FailingPort = {
  name: 'node (await limit)',
  onError: true,
  makeApp(spec) {
    const onError =
      spec.onError ??
      ((err: unknown, _req: unknown, res: http.ServerResponse) => {
        if (spec.errorHandlerFails) throw new Error('error handler bug');
        answerError(err, res);
      });
    const control = spec.control && nodeControls[spec.control.kind]({ ...spec.control.options, onError } as never);
    const { handler } = spec;
    const limit = node.rateLimit({
      ...(spec.rateLimit as object),
      onError,
      ...(handler ? { handler: (req: unknown, _res: unknown, _next: unknown, d: never) => handler(req, d) } : {}),
    } as never);
    return listen(
      http.createServer(async (req, res) => {
        if (control && !(await control(req, res))) return;
        if (!(await limit(req, res))) return;
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ ok: true }));
      }),
    );
  },
};

/** The connect-style `.middleware` form: errors reach `next(err)`. */
const nodeMiddlewarePort: FailingPort = {
  name: 'node (middleware)',
  onError: false,
  makeApp(spec) {
    const control = spec.control && nodeControls[spec.control.kind](spec.control.options as never);
    const { handler } = spec;
    const limit = node.rateLimit({
      ...(spec.rateLimit as object),
      ...(handler ? { handler: (req: unknown, _res: unknown, _next: unknown, d: never) => handler(req, d) } : {}),
    } as never);
    const stages = [...(control ? [control.middleware] : []), limit.middleware];
    return listen(
      http.createServer((req, res) => {
        const run = (i: number): void => {
          const stage = stages[i];
          if (stage === undefined) {
            res.setHeader('Content-Type', 'application/json');
            res.end(JSON.stringify({ ok: true }));
            return;
          }
          stage(req, res, (err) => {
            if (err === undefined) return run(i + 1);
            // The connect-style app's own error path: when it fails, the app answers 500 itself.
            if (spec.errorHandlerFails) {
              res.statusCode = 500;
              res.end();
              return;
            }
            answerError(err, res);
          });
        };
        run(0);
      }),
    );
  },
};

/** Koa: a failing callback reaches the app's own try/catch around `await next()`. */
const koaPort: FailingPort = {
  name: 'Koa',
  onError: false,
  makeApp(spec) {
    const app = new Koa();
    app.silent = true;
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch (err) {
        if (spec.errorHandlerFails) throw new Error('error handler bug');
        ctx.status = 500;
        ctx.body = errorBody(err);
      }
    });
    const controls = { slowDown: koaSlowDown, concurrency: koaConcurrency, shed: koaShed, limitRate: koaLimitRate };
    if (spec.control) app.use(controls[spec.control.kind](spec.control.options as never));
    const { handler } = spec;
    app.use(
      koaRateLimit({
        ...(spec.rateLimit as object),
        ...(handler ? { handler: (ctx: unknown, _next: unknown, d: never) => handler(ctx, d) } : {}),
      } as never),
    );
    app.use((ctx) => {
      ctx.body = { ok: true };
    });
    return listen(http.createServer(app.callback()));
  },
};

/** Hono on @hono/node-server: a failing callback reaches `app.onError`; when that throws too, node-server answers 500. */
const honoPort: FailingPort = {
  name: 'Hono',
  onError: false,
  makeApp(spec) {
    const app = new Hono();
    app.onError((err, c) => {
      if (spec.errorHandlerFails) throw new Error('error handler bug');
      return c.json(errorBody(err), 500);
    });
    const controls = { slowDown: honoSlowDown, concurrency: honoConcurrency, shed: honoShed, limitRate: honoLimitRate };
    // Shedding reads no client address, so it takes no connInfo.
    const own = spec.control?.kind === 'shed' ? {} : { connInfo: getConnInfo };
    if (spec.control) app.use(controls[spec.control.kind]({ ...spec.control.options, ...own } as never) as MiddlewareHandler);
    const { handler } = spec;
    app.use(
      honoRateLimit({
        ...(spec.rateLimit as object),
        connInfo: getConnInfo,
        ...(handler ? { handler: (c: unknown, d: never) => handler(c, d) } : {}),
      } as never),
    );
    app.get('/', (c) => c.json({ ok: true }));
    return new Promise<FailingApp>((resolve) => {
      const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
        resolve({
          port: info.port,
          close: () =>
            new Promise<void>((done) => {
              (server as http.Server).closeAllConnections();
              server.close(() => done());
            }),
        }),
      );
    });
  },
};

/**
 * NestJS: a failing callback rejects the guard, or a control applied as Nest middleware calls
 * `next(err)`; either reaches Nest's exception handling (a catch-all filter).
 */
function nestPort(platform: 'express' | 'fastify'): FailingPort {
  return {
    name: `NestJS on ${platform === 'express' ? 'Express' : 'Fastify'}`,
    onError: false,
    async makeApp(spec) {
      class Hello {
        hello() {
          return { ok: true };
        }
      }
      Get()(Hello.prototype, 'hello', Object.getOwnPropertyDescriptor(Hello.prototype, 'hello') as PropertyDescriptor);
      Controller()(Hello);
      const { handler } = spec;
      const tollgate = TollgateModule.forRoot({
        ...(spec.rateLimit as object),
        ...(handler ? { handler: (req: unknown, _res: unknown, d: never) => handler(req, d) } : {}),
      } as never);
      const controls = { slowDown: nestSlowDown, concurrency: nestConcurrency, shed: nestShed, limitRate: nestLimitRate };
      const control = spec.control && controls[spec.control.kind](spec.control.options as never);
      class AppModule {
        configure(consumer: MiddlewareConsumer) {
          if (control) consumer.apply(control).forRoutes(Hello);
        }
      }
      Module({ imports: [tollgate], controllers: [Hello], providers: [{ provide: APP_GUARD, useClass: TollgateGuard }] })(AppModule);
      const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
      const app = await NestFactory.create(AppModule, adapter, { logger: false, abortOnError: false });
      const { httpAdapter } = app.get(HttpAdapterHost);
      class AnswerErrors {
        catch(err: unknown, host: { switchToHttp(): { getResponse(): unknown } }) {
          if (spec.errorHandlerFails) throw new Error('error handler bug');
          httpAdapter.reply(host.switchToHttp().getResponse(), errorBody(err), 500);
        }
      }
      Catch()(AnswerErrors);
      app.useGlobalFilters(new AnswerErrors());
      await app.listen(0, '127.0.0.1');
      return {
        port: (app.getHttpServer().address() as { port: number }).port,
        async close() {
          await app.close();
          await control?.close();
        },
      };
    },
  };
}

failingCallbackSuite([
  expressPort('Express 5', express5),
  expressPort('Express 4', express4 as unknown as typeof express5),
  fastifyPort,
  nodeAsyncPort,
  nodeMiddlewarePort,
  koaPort,
  honoPort,
  nestPort('express'),
  nestPort('fastify'),
]);

describe('middleware called by hand with a bare request (a mock without headers or socket)', () => {
  const bare = () => ({}) as never;
  const res = () => ({ setHeader() {}, getHeader() {}, on() {}, once() {}, removeListener() {} }) as never;
  const stages: [string, (req: never, res: never, next: (err?: unknown) => void) => unknown][] = [
    ['Express rateLimit', expressRateLimit({ rules: [{ name: 'r', limit: 5, window: '1m' }] })],
    [
      'Express route stage',
      expressRateLimit({ rules: [{ name: 'r', limit: 5, window: '1m' }] }).route({ rules: [{ name: 'route', limit: 5, window: '1m' }] }),
    ],
    ['Express slowDown', expressSlowDown({ window: '1m', delayAfter: 5 })],
    ['Express concurrency', expressConcurrency({ max: 2 })],
    ['Express shed', expressShed({ maxInFlight: 10 })],
    ['node rateLimit middleware', node.rateLimit({ rules: [{ name: 'r', limit: 5, window: '1m' }] }).middleware],
  ];
  for (const [name, stage] of stages) {
    it(`${name} never throws and calls next once`, async () => {
      const calls: unknown[][] = [];
      const next = (...args: unknown[]) => {
        calls.push(args);
      };
      expect(() => stage(bare(), res(), next)).not.toThrow();
      await new Promise((r) => setTimeout(r, 20));
      expect(calls).toHaveLength(1);
    });
  }
});

describe('Hono middleware called by hand with a bare context (a mock without req, env or set)', () => {
  const stages: [string, (c: never, next: () => Promise<void>) => Promise<unknown>][] = [
    ['rateLimit', honoRateLimit({ rules: [{ name: 'r', limit: 5, window: '1m' }] })],
    [
      'route stage',
      honoRateLimit({ rules: [{ name: 'r', limit: 5, window: '1m' }] }).route({ rules: [{ name: 'route', limit: 5, window: '1m' }] }),
    ],
    ['slowDown', honoSlowDown({ window: '1m', delayAfter: 5 })],
    ['concurrency', honoConcurrency({ max: 2 })],
    ['shed', honoShed({ maxInFlight: 10 })],
  ];
  for (const [name, stage] of stages) {
    it(`${name} never throws, rejects for Hono's onError, nothing escapes`, async () => {
      const escaped: unknown[] = [];
      const onEscape = (err: unknown) => escaped.push(err);
      process.on('unhandledRejection', onEscape);
      process.on('uncaughtException', onEscape);
      try {
        let nexts = 0;
        let run: Promise<unknown> | undefined;
        expect(() => {
          run = stage({} as never, async () => {
            nexts++;
          });
        }).not.toThrow();
        const settled = await Promise.race([
          (run as Promise<unknown>).then(
            () => 'resolved',
            (err: unknown) => (err instanceof Error ? 'rejected' : 'rejected with a non-Error'),
          ),
          new Promise((r) => setTimeout(() => r('pending'), 200)),
        ]);
        await new Promise((r) => setImmediate(r));
        expect(settled).toBe('rejected');
        expect(nexts).toBe(0);
        expect(escaped).toEqual([]);
      } finally {
        process.off('unhandledRejection', onEscape);
        process.off('uncaughtException', onEscape);
      }
    });
  }
});
