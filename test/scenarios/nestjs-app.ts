/**
 * The scenario app (scenarios.ts, AppSpec) on NestJS, on either platform: the app-level
 * options through `TollgateModule.forRoot`, a global `TollgateGuard`, and one controller
 * per route whose handler carries the route's rules as `@RateLimit`. Listens on loopback
 * through an HTTP server of its own (for `maxHeaderSize`).
 */
import http from 'node:http';
import { Controller, Get, HttpCode, Module, Post, Req } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimit, TollgateGuard, TollgateModule, TollgateService } from '@tollgate/nestjs';
import { limiterOptions } from './app-options.js';
import type { AppSpec, ListeningApp, RouteSpec } from './scenarios.js';

export type Platform = 'express' | 'fastify';

/** A controller answering `route` with the suite's body, its rules as the handler's `@RateLimit`. */
function controllerOf(route: Pick<RouteSpec, 'method' | 'path' | 'rules' | 'mode'>): new () => unknown {
  class RouteController {
    answer(req: { rateLimit?: unknown }) {
      return { route: route.path, rateLimit: req.rateLimit ?? null };
    }
  }
  const proto = RouteController.prototype;
  const descriptor = Object.getOwnPropertyDescriptor(proto, 'answer') as PropertyDescriptor;
  (route.method === 'POST' ? Post : Get)(route.path)(proto, 'answer', descriptor);
  // The suite's routes answer 200 (Nest's POST default is 201).
  HttpCode(200)(proto, 'answer', descriptor);
  if (route.rules) RateLimit({ rules: route.rules as never, ...(route.mode ? { mode: route.mode } : {}) })(proto, 'answer', descriptor);
  Req()(proto, 'answer', 0);
  Controller()(RouteController);
  return RouteController;
}

/** Builds the scenario app on Nest's `platform`. */
export function nestApp(platform: Platform) {
  return async function makeApp(spec: AppSpec): Promise<ListeningApp> {
    const tollgate = TollgateModule.forRoot(limiterOptions(spec));
    const controllers = [...spec.routes, { method: 'GET' as const, path: '/' }].map(controllerOf);
    class AppModule {}
    Module({ imports: [tollgate], controllers, providers: [{ provide: APP_GUARD, useClass: TollgateGuard }] })(AppModule);

    let server: http.Server | undefined;
    const adapter =
      platform === 'express'
        ? new ExpressAdapter()
        : new FastifyAdapter({
            serverFactory: (handler: http.RequestListener) => {
              server = http.createServer({ maxHeaderSize: spec.maxHeaderSize }, handler);
              return server;
            },
          });
    const app = await NestFactory.create(AppModule, adapter, { logger: false, abortOnError: false });
    await app.init();
    if (platform === 'express') {
      const own = http.createServer({ maxHeaderSize: spec.maxHeaderSize }, app.getHttpAdapter().getInstance() as http.RequestListener);
      server = own;
      await new Promise<void>((resolve) => own.listen(0, '127.0.0.1', resolve));
    } else {
      await app.listen(0, '127.0.0.1');
    }
    const service = app.get(TollgateService);
    return {
      port: ((server as http.Server).address() as { port: number }).port,
      async close() {
        if (platform === 'express') await new Promise<void>((resolve) => server?.close(() => resolve()));
        await app.close();
      },
      update: (name, changes) => service.update(name, changes),
    };
  };
}
