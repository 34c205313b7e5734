/**
 * The shaping scenarios (limitRate) on fastify, and what only Fastify has: Web stream
 * bodies, the plugin form and a route's opt-out.
 */
import { limitRate } from '@tollgate/fastify';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { fastifyShapingApp } from './apps.js';
import { download, worstExcess } from './client.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('fastify', fastifyShapingApp);

describe('limitRate as a Fastify plugin', () => {
  it('paces a Web ReadableStream body, and leaves a route with config.limitRate false alone', async () => {
    const app = Fastify();
    await app.register(limitRate, { rate: '400KB/s', burst: '100KB' });
    app.get('/web', (_req, reply) => {
      let left = 300_000;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (left <= 0) {
            controller.close();
            return;
          }
          const n = Math.min(16_384, left);
          left -= n;
          controller.enqueue(new Uint8Array(n));
        },
      });
      return reply.type('application/octet-stream').send(body);
    });
    app.get('/free', { config: { limitRate: false } }, (_req, reply) => reply.send(Buffer.alloc(300_000)));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    try {
      const web = await download(port, '/web');
      expect(web.bytes).toBe(300_000);
      expect(worstExcess(web.samples, 100_000, 400_000, 100)).toBeLessThanOrEqual(0);
      expect(web.ms).toBeGreaterThanOrEqual(((300_000 - 100_000) / 400_000) * 1000 * 0.98);
      // The bucket is empty now: a paced route would need more than 700 ms.
      const free = await download(port, '/free');
      expect(free.bytes).toBe(300_000);
      expect(free.ms).toBeLessThan(700);
    } finally {
      app.server.closeAllConnections();
      await app.close();
    }
  });
});
