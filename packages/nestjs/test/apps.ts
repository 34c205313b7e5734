/**
 * Nest apps for the tests, on either platform, listening on a loopback port; and a
 * request helper over real sockets.
 */
import type { INestApplication, Type } from '@nestjs/common';
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
  const options = { logger: false as const, abortOnError: false };
  const root = module as Type;
  const app: INestApplication =
    platform === 'express'
      ? await NestFactory.create(root, new ExpressAdapter(), options)
      : await NestFactory.create(root, new FastifyAdapter(), options);
  try {
    await app.listen(0, '127.0.0.1');
  } catch (err) {
    await app.close();
    throw err;
  }
  const port = (app.getHttpServer().address() as { port: number }).port;
  return {
    app,
    port,
    get: (path, o = {}) => send(port, { path, ...o }).reply,
    close: () => app.close(),
  };
}
