/**
 * The scenario app on Fastify 5 (`makeApp` of the HTTP scenario suite), for one
 * transport: real loopback sockets (`app.listen`), or in-process `app.inject` with the
 * scenario's client address as `remoteAddress`. Shared by the memory and Redis runs.
 */
import http from 'node:http';
import tollgate from '@tollgate/fastify';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { limiterOptions } from './app-options.js';
import type { AppSpec, ListeningApp, ScenarioResponse, SendOptions } from './scenarios.js';

export type Transport = 'socket' | 'inject';

async function build(spec: AppSpec): Promise<FastifyInstance> {
  const app = Fastify({
    logger: false,
    serverFactory: (handler) => http.createServer({ maxHeaderSize: spec.maxHeaderSize }, handler),
  });
  await app.register(tollgate, limiterOptions(spec));
  const answer = (path: string) => async (request: FastifyRequest) => ({ route: path, rateLimit: request.rateLimit ?? null });
  for (const route of spec.routes) {
    app.route({
      method: route.method,
      url: route.path,
      ...(route.rules ? { config: { rateLimit: { rules: route.rules as never, ...(route.mode ? { mode: route.mode } : {}) } } } : {}),
      handler: answer(route.path),
    });
  }
  app.get('/', answer('/'));
  return app;
}

/** Builds the scenario app on Fastify for one transport. */
export function fastifyApp(transport: Transport) {
  return async function makeApp(spec: AppSpec): Promise<ListeningApp> {
    const app = await build(spec);
    if (transport === 'socket') {
      await app.listen({ port: 0, host: '127.0.0.1' });
      return {
        port: (app.server.address() as { port: number }).port,
        close: () => app.close(),
        update: (name, changes) => app.tollgate.update(name, changes),
      };
    }
    await app.ready();
    return {
      port: 0,
      close: () => app.close(),
      update: (name, changes) => app.tollgate.update(name, changes),
      async send(o: SendOptions): Promise<ScenarioResponse> {
        const started = performance.now();
        const res = await app.inject({
          method: o.method ?? 'GET',
          url: o.path ?? '/',
          headers: o.headers ?? {},
          remoteAddress: o.from ?? '127.0.0.1',
        });
        let body: unknown;
        try {
          body = JSON.parse(res.body);
        } catch {
          body = undefined;
        }
        return {
          status: res.statusCode,
          headers: res.headers as http.IncomingHttpHeaders,
          text: res.body,
          body,
          ms: performance.now() - started,
        };
      },
    };
  };
}
