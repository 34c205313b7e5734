/**
 * The shaping scenario app (see apps.ts) on NestJS, on either platform: `limitRate` from
 * @tollgate/nestjs applied through `MiddlewareConsumer` to a controller answering `/buf`
 * (one buffer) and `/stream` (a readable stream), with the platform's response (`@Res()`).
 */
import type http from 'node:http';
import { pipeline } from 'node:stream';
import { Controller, Get, type MiddlewareConsumer, Module, Req, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { ByteRateLimit } from '@tollgate/core';
import { limitRate } from '@tollgate/nestjs';
import { type MakeShapingApp, source } from './apps.js';

// biome-ignore lint/suspicious/noExplicitAny: Express' or Fastify's request and response
type Any = any;

const sizeOf = (url: string) => Number(new URL(url, 'http://localhost').searchParams.get('n') ?? '0');

export function nestShapingApp(platform: 'express' | 'fastify'): MakeShapingApp {
  return async (options) => {
    const pace = limitRate(options as never);
    const state = { produced: new Map<string, number>(), destroyed: new Set<string>() };

    @Controller()
    class Downloads {
      @Get('buf')
      buf(@Req() req: Any, @Res() res: Any) {
        res.send(Buffer.alloc(sizeOf(req.url), 0x62));
      }

      @Get('stream')
      stream(@Req() req: Any, @Res() res: Any) {
        const body = source(sizeOf(req.url), String(req.headers['x-id'] ?? ''), state);
        if (platform === 'fastify') {
          res.type('application/octet-stream').send(body);
          return;
        }
        res.setHeader('Content-Type', 'application/octet-stream');
        pipeline(body, res, () => {});
      }
    }

    class AppModule {
      configure(consumer: MiddlewareConsumer) {
        consumer.apply(pace).forRoutes(Downloads);
      }
    }
    Module({ controllers: [Downloads] })(AppModule);

    const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
    const app = await NestFactory.create(AppModule, adapter, { logger: false, abortOnError: false });
    await app.listen(0, '127.0.0.1');
    const server = app.getHttpServer() as http.Server;
    return {
      port: (server.address() as { port: number }).port,
      ...state,
      limit: () => pace.limit as ByteRateLimit<unknown>,
      close: async () => {
        server.closeAllConnections();
        await app.close();
        await pace.close();
      },
    };
  };
}
