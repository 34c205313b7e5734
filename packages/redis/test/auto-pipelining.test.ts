/**
 * A standalone ioredis / iovalkey client with `enableAutoPipelining`: the store batches its
 * own stacks per tick, so its script calls are sent as commands of their own (client.ts,
 * `directCalls`) instead of through a `Pipeline` built per tick around the one call. What
 * the client's own methods would have done stays: Buffer replies, the client's
 * `keyPrefix`, FCALL and the EVALSHA fallback, and the app's commands still auto-pipelined.
 */
import { createLimiter, ManualClock } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { portOf } from '../src/client.js';
import { runnerOf } from '../src/script.js';

let server: RedisServer;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server.destroy();
});

const SLOW = 10_000;
const families = [
  ['ioredis', (o: object) => new Redis({ port: server.port, host: '127.0.0.1', ...o })],
  ['iovalkey', (o: object) => new Valkey({ port: server.port, host: '127.0.0.1', ...o }) as unknown as Redis],
] as const;

describe.each(families)('%s with enableAutoPipelining', (family, make) => {
  it('decides without building a Pipeline per call (it did, once per tick), and the app still auto-pipelines', async () => {
    const client = make({ enableAutoPipelining: true });
    try {
      const store = new RedisStore({ client, prefix: `ap-${family}:`, timeoutMs: SLOW, denyCache: false });
      // A still clock: on Redis time a minute boundary among the four consumes let the fourth through.
      const limiter = createLimiter({
        rules: [{ name: 'r', key: () => 'k', limit: 3, window: '1m' }],
        store,
        clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
      });
      await limiter.peek({});
      const pipelines = vi.spyOn(client, 'pipeline');
      // Patched after the store was made, as instrumentation does: still what sends.
      const sent = vi.spyOn(client, 'sendCommand');
      const allowed: boolean[] = [];
      for (let i = 0; i < 4; i++) allowed.push((await limiter.consume({})).allowed);
      // Four stacks asked in one tick: one batched call, still no Pipeline.
      const burst = await Promise.all([0, 1, 2, 3].map(() => limiter.peek({})));
      expect(allowed).toEqual([true, true, true, false]);
      expect(burst.map((d) => d.rules[0]?.remaining)).toEqual([0, 0, 0, 0]);
      expect(pipelines).not.toHaveBeenCalled();
      expect(sent.mock.calls.map(([c]) => (c as { name: string }).name)).toEqual(['fcall', 'fcall', 'fcall', 'fcall', 'fcall']);
      // The app's own commands are the client's business: auto-pipelined as configured.
      await Promise.all([client.get('ap-app-1'), client.get('ap-app-2')]);
      expect(pipelines).toHaveBeenCalled();
      expect(runnerOf(portOf(client) as never).mode).toBe('functions');
      await limiter.reset({});
      await store.close();
    } finally {
      client.disconnect();
    }
  });

  it("keeps the client's keyPrefix on the store's keys, on FCALL and on EVALSHA", async () => {
    const client = make({ enableAutoPipelining: true, keyPrefix: `kp-${family}:` });
    const admin = make({});
    try {
      const store = new RedisStore({ client, prefix: 'ap:', timeoutMs: SLOW, denyCache: false });
      const limiter = createLimiter({ rules: [{ name: 'r', key: () => 'k', limit: 5, window: '1m' }], store });
      expect((await limiter.consume({})).allowed).toBe(true);
      const key = store.keyOf(limiter.rules[0]?.spec as never, 'k');
      expect(await admin.exists(`kp-${family}:${key}`)).toBe(1);
      expect(await admin.exists(key)).toBe(0);
      // The script path (as on a server without functions) goes through the same port.
      const port = portOf(client);
      const reply = await port?.evalsha('0'.repeat(40), [key], []).catch((e: Error) => e.message);
      expect(String(reply)).toMatch(/^NOSCRIPT/);
      const echoed = await port?.eval('return KEYS[1]', [key], []);
      expect(Buffer.isBuffer(echoed) && echoed.toString()).toBe(`kp-${family}:${key}`);
      await admin.del(`kp-${family}:${key}`);
      await store.close();
    } finally {
      client.disconnect();
      admin.disconnect();
    }
  });
});
