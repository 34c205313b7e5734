/**
 * The control scenario app on Fastify 5 (see suite.ts for the contract): the stages
 * register `shed`, `slowDown`, `concurrency` and the tollgate plugin (`rateLimit`
 * stage) from @tollgate/fastify in order, each adding its `onRequest` hook.
 */
import { PassThrough } from 'node:stream';
import tollgate, { concurrency, shed, slowDown } from '@tollgate/fastify';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import type { ControlAppSpec, ListeningControlApp } from './suite.js';

export async function fastifyControlApp(spec: ControlAppSpec): Promise<ListeningControlApp> {
  const app = Fastify();
  for (const stage of spec.stages) {
    switch (stage.kind) {
      case 'slowDown':
        await app.register(slowDown, stage.options as never);
        break;
      case 'rateLimit':
        await app.register(tollgate, stage.options as never);
        break;
      case 'concurrency':
        await app.register(concurrency, stage.options as never);
        break;
      case 'shed':
        await app.register(shed, stage.options as never);
        break;
    }
  }
  const handler = (request: FastifyRequest, reply: FastifyReply) => {
    const path = new URL(request.url, 'http://localhost').pathname;
    spec.onStart(path, request);
    const body = () => ({ path, start: spec.clock.now(), rateLimit: request.rateLimit ?? null });
    const b = spec.behaviour(path);
    switch (b.kind) {
      case 'ok':
        return reply.send(body());
      case 'status':
        return reply.code(b.status).send(body());
      case 'slow':
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
        return reply.type('text/plain').send(stream);
      }
    }
  };
  app.all('/', handler);
  app.all('/*', handler);
  app.setErrorHandler((_err, _request, reply) => {
    reply.code(500).send('error');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    port: (app.server.address() as { port: number }).port,
    async close() {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}
