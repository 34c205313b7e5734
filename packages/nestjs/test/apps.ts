/**
 * Nest apps for the tests, on either platform, listening on a loopback port; and a
 * request helper over real sockets.
 */
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { type Reply, send } from '../../../test/setup/http.js';

export type Platform = 'express' | 'fastify';
export const platforms: Platform[] = ['express', 'fastify'];

export interface Running {
  app: INestApplication;
  port: number;
  get(path: string, o?: { from?: string; headers?: Record<string, string> }): Promise<Reply>;
  close(): Promise<void>;
}

/** Creates `module` on `platform` and listens on 127.0.0.1, port 0. */
export async function listen(platform: Platform, module: unknown): Promise<Running> {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(module as never, adapter as never, { logger: false, abortOnError: false });
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as { port: number }).port;
  return {
    app,
    port,
    get: (path, o = {}) => send(port, { path, ...o }).reply,
    close: () => app.close(),
  };
}
