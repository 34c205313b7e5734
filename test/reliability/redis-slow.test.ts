/**
 * Redis made slow (issue 9, item 1; SPEC 6.5), on ioredis and node-redis (issue 19, item 4): a delaying TCP proxy (helpers/delay-proxy.ts)
 * sits between each app and redis-server. Mid-load the proxy starts holding every chunk
 * for 1.5 s (thirty times the store's deadline), then stops. The apps (Express and Fastify, child
 * processes, `onStoreError: 'local'`) keep answering 200, none waiting for Redis; their
 * breakers open while Redis is slow and close again by themselves afterwards, as the
 * store's `breaker` events (reported from the child over IPC) show.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { sleep, startApp, startLoad, summarize, until } from './helpers/children.js';
import { DelayProxy } from './helpers/delay-proxy.js';

const TIMEOUT_MS = 50;
/**
 * Any single answer, measured in the app (helpers/app.ts LATE_HEADER): at most this much
 * later than a plain deadline timer started as the request reached the limiter. A request
 * waiting for Redis is late by the fault (1 500 ms); a busy machine delays that timer as much as the
 * store's own deadline timer, so it cannot change the verdict (beside a CPU hog: late by at
 * most 98 ms, where the load generator's round trips took up to 1.7 s).
 */
const MAX_LATE_MS = 600;
/**
 * No answer by then is a hung request. Not the verdict on waiting (MAX_LATE_MS is): beside a
 * CPU hog the load generator's own round trips took up to 2.5 s, and a request that waited
 * for Redis is answered late, which the app measures.
 */
const HUNG_MS = 10_000;
const SLOW_MS = 1500;
/** Answers before the delay starts and after it stops: the phases are counted, so a busy machine cannot thin them out. */
const BEFORE = 150;
const AFTER = 50;
/** Answers while Redis is slow, at least. */
const SLOW_ANSWERS = 30;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.destroy();
});

describe('Redis slowed by a delaying proxy', () => {
  it.each([
    ['express', 'ioredis'],
    ['fastify', 'ioredis'],
    ['express', 'node-redis 5'],
    ['fastify', 'node-redis 6'],
  ] as const)(
    '%s on %s: no answer waits for the slow Redis; the breaker opens and closes',
    async (framework, client) => {
      const proxy = new DelayProxy(redis.port);
      await proxy.listen();
      const app = await startApp({
        framework,
        client,
        redis: { port: proxy.port },
        onStoreError: 'local',
        timeoutMs: TIMEOUT_MS,
        breaker: { failures: 3, cooldownMs: 150 },
        storePrefix: `slow-${framework}-${client.replace(/\W/g, '')}:`,
        rules: [{ name: 'ip', limit: 1_000_000, window: '1m' }],
      });
      try {
        // durationMs and maxRequests are only caps: the load stops when told.
        const load = startLoad({
          ports: [app.port],
          workers: 4,
          pauseMs: 4,
          durationMs: 40_000,
          maxRequests: 20_000,
          requestTimeoutMs: HUNG_MS,
        });
        await load.started;
        const startedAt = Date.now();
        await load.answered(BEFORE);
        proxy.delayMs = SLOW_MS;
        const slowFrom = Date.now();
        // Slow for 1.5 s and for SLOW_ANSWERS answers at least: counted, so a busy machine
        // (which answers fewer per second) cannot leave the phase nearly empty.
        await Promise.all([sleep(1500), load.answered(SLOW_ANSWERS)]);
        proxy.delayMs = 0;
        const fastAgain = Date.now();
        const slowFor = fastAgain - slowFrom;
        // Back on Redis (the breaker closed again), then AFTER more answers from there.
        await until(() => app.closedSince(fastAgain), 60_000);
        await load.answered(AFTER);
        const r = await load.stop();
        const s = summarize(r);
        const baseline = summarize(r, 0, slowFrom - startedAt).p99;
        const changes = app.breakerChanges();
        console.log(
          `[slow] ${framework} ${client}: ${JSON.stringify(s)}; p99 before ${baseline.toFixed(1)} ms; slow for ${slowFor} ms (+${SLOW_MS} ms per chunk); breaker ${changes.join(' ')}`,
        );
        expect(s.byStatus).toEqual({ 200: s.total });
        // The app never waited for the slow Redis: measured in the app against a plain timer, so
        // the machine's load (which stretches the load generator's round trips, the p99 above)
        // cannot decide it; a request that waited would be late by the delay (1.5 s).
        expect(s.lateMax).toBeLessThanOrEqual(MAX_LATE_MS);
        expect(changes).toEqual(expect.arrayContaining(['closed>open', 'open>half-open']));
        // Recovered by itself once the delay stopped (chunks already held still arrive late).
        expect(app.closedSince(fastAgain)).toBe(true);
      } finally {
        expect(await app.stop()).toBe(0);
        await proxy.close();
      }
    },
    // A cap for a hang only: every phase is counted.
    180_000,
  );
});
