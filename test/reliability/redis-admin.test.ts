/**
 * Redis administration under load (issue 9, item 1; SPEC 6.3, 6.5): `SCRIPT FLUSH` (the
 * next EVALSHA gets NOSCRIPT, the store loads the script and retries once), `CLIENT KILL`
 * of the apps' connections (ioredis reconnects) and `FLUSHALL` (every counter gone) while
 * an Express and a Fastify app take load. Nothing crashes, no request hangs or fails,
 * and both apps write their keys to Redis again afterwards.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, rawCommand, startRedis } from '../setup/redis.js';
import { startApp, startLoad, summarize } from './helpers/children.js';

const TIMEOUT_MS = 50;
/** Answers each app gives before the first command and after each one: the test is driven by counts, not by sleeps. */
const ANSWERS = 60;
/** As in redis-outage.test.ts: p99 beyond the deadline and the pre-fault p99. */
const P99_MARGIN_MS = 150;
/**
 * Any single answer, measured in the app (helpers/app.ts LATE_HEADER): at most this much
 * later than a plain deadline timer started as the request reached the limiter. A request
 * waiting for Redis is late by a reconnect or a script load; a busy machine delays that timer as much as the
 * store's own deadline timer, so it cannot change the verdict (beside a CPU hog: late by at
 * most 98 ms, where the load generator's round trips took up to 1.7 s).
 */
const MAX_LATE_MS = 600;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.destroy();
});

async function keysOf(port: number, match: string): Promise<string[]> {
  const c = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  try {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await c.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    return keys.sort();
  } finally {
    c.disconnect();
  }
}

describe('SCRIPT FLUSH, CLIENT KILL and FLUSHALL mid-load', () => {
  it('Express and Fastify: no crash, no hung or failed request, back on Redis afterwards', async () => {
    const apps = await Promise.all(
      (['express', 'fastify'] as const).map((framework) =>
        startApp({
          framework,
          redis: { port: redis.port },
          onStoreError: 'local',
          timeoutMs: TIMEOUT_MS,
          breaker: { failures: 3, cooldownMs: 150 },
          storePrefix: `admin-${framework}:`,
          rules: [
            { name: 'ip', limit: 1_000_000, window: '1m' },
            { name: 'all', keyBy: 'const', limit: 1_000_000, window: '1h', algorithm: 'fixed-window' },
          ],
        }),
      ),
    );
    try {
      const loads = apps.map((app) =>
        // durationMs and maxRequests are only caps: the load stops when told.
        startLoad({ ports: [app.port], workers: 4, pauseMs: 4, durationMs: 40_000, maxRequests: 20_000, requestTimeoutMs: 2000 }),
      );
      await Promise.all(loads.map((l) => l.started));
      const startedAt = Date.now();
      let firstCommandAt = 0;
      const replies: string[] = [];
      for (const command of ['SCRIPT FLUSH', 'CLIENT KILL TYPE normal', 'FLUSHALL', 'SCRIPT FLUSH', 'CLIENT KILL TYPE normal']) {
        await Promise.all(loads.map((l) => l.answered(ANSWERS)));
        firstCommandAt ||= Date.now();
        replies.push(`${command}: ${(await rawCommand(redis.port, command)).trim()}`);
      }
      await Promise.all(loads.map((l) => l.answered(ANSWERS)));
      // The apps are the only normal clients besides the one issuing the command (SKIPME).
      expect(replies[1]).toMatch(/^CLIENT KILL TYPE normal: :[1-9]/);
      expect(replies[2]).toBe('FLUSHALL: +OK');
      const results = await Promise.all(loads.map((l) => l.stop()));
      for (const [i, app] of apps.entries()) {
        const framework = i === 0 ? 'express' : 'fastify';
        const r = results[i] as (typeof results)[number];
        const s = summarize(r);
        const baseline = summarize(r, 0, firstCommandAt - startedAt).p99;
        console.log(
          `[admin] ${framework}: ${JSON.stringify(s)}; p99 before ${baseline.toFixed(1)} ms; breaker ${app.breakerChanges().join(' ') || 'never opened'}`,
        );
        expect(s.byStatus).toEqual({ 200: s.total });
        expect(s.p99).toBeLessThanOrEqual(TIMEOUT_MS + P99_MARGIN_MS + baseline);
        expect(s.lateMax).toBeLessThanOrEqual(MAX_LATE_MS);
        // FLUSHALL emptied Redis; the app's keys are back, so its decisions reach Redis again.
        expect(await keysOf(redis.port, `admin-${framework}:*`)).toEqual([
          `admin-${framework}:tg:all:f3600000{all}`,
          `admin-${framework}:tg:ip:w60000{127.0.0.1}`,
        ]);
      }
    } finally {
      for (const app of apps) expect(await app.stop()).toBe(0);
    }
  }, 60_000);
});
