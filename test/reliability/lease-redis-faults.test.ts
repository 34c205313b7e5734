/**
 * Leases while Redis is slow or gone, the instances in separate processes (each its own
 * RedisStore with `lease` and `onStoreError: 'deny'`) reaching Redis through a proxy
 * (helpers/delay-proxy.ts), so Redis keeps its counts through the fault and they are
 * checked against every admission afterwards:
 * - slow (every chunk held five times the deadline) or gone (the proxy drops its
 *   connections and refuses new ones): each instance admits the units it holds from its
 *   leases, none degraded, and only then does the failure policy answer;
 * - when Redis answers again, it decides and leases resume;
 * - a give-back that fails (an instance closing while Redis is gone) leaves its units
 *   counted: the others never admit them;
 * - no more is admitted than Redis counted, and what it counted beyond the admissions is
 *   bounded by the calls that failed.
 * Phases follow counts (the units held, requests past them, the first answer from Redis);
 * the lease's ttl is long against them, a safety net for a slow machine.
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { type LeaseWorker, startLeaseWorker } from './helpers/children.js';
import { DelayProxy } from './helpers/delay-proxy.js';
import { mostInAny } from './helpers/lease-guarantee.js';
import type { LeaseWorkerConfig, LeaseWorkerReply, WorkerDecision } from './helpers/lease-worker.js';

const L = 200;
const W = 3_600_000;
/** Long against the phases (and the sweep that ends expired leases runs once per ttl): a safety net for a slow machine, not a bound. */
const TTL = 300_000;
const MAX = 20;
const TIMEOUT_MS = 300;
const RULE: Rule<unknown> = { name: 'sl', algorithm: 'sliding-log', limit: L, window: W };
/** Requests past the held units while Redis is slow or gone: each answered by the policy. */
const PAST = 3;

let redis: RedisServer;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis({ port: redis.port, host: '127.0.0.1' });
});
afterAll(async () => {
  admin.disconnect();
  await redis?.destroy();
});

/** Instances of one test, and every decision and store error they reported. */
class Fleet {
  readonly decisions: WorkerDecision[] = [];
  readonly errors: Record<string, number> = {};
  workers: LeaseWorker[] = [];

  async start(n: number, config: Omit<LeaseWorkerConfig, 'instances' | 'rules' | 'lease' | 'onStoreError' | 'timeoutMs' | 'breaker'>) {
    this.workers = await Promise.all(
      Array.from({ length: n }, () =>
        startLeaseWorker({
          ...config,
          instances: n,
          rules: [RULE],
          lease: { max: MAX, ttl: TTL },
          onStoreError: 'deny',
          timeoutMs: TIMEOUT_MS,
          breaker: { failures: 3, cooldownMs: 200 },
        }),
      ),
    );
    return this.workers;
  }

  keep(r: LeaseWorkerReply): LeaseWorkerReply {
    this.decisions.push(...r.decisions);
    return r;
  }

  /** Each worker holds a lease of at least 5 units; resolves with what each holds. */
  async lease(workers: LeaseWorker[]): Promise<number[]> {
    const held = await Promise.all(
      workers.map(async (w) => this.keep(await w.run(0, 200, { kind: 'held', units: 5, pauseMs: 50 })).held[0] as number),
    );
    for (const h of held) expect(h).toBeGreaterThanOrEqual(5);
    return held;
  }

  /** Redis cannot answer: each worker admits what it holds from its lease, then the policy answers. */
  async spend(workers: LeaseWorker[], held: number[]): Promise<void> {
    await Promise.all(
      workers.map(async (w, i) => {
        const own = this.keep(await w.run(0, held[i] as number)).decisions;
        expect(own.map((d) => [d[3], d[4]])).toEqual(own.map(() => [1, 0]));
        const past = this.keep(await w.run(0, PAST)).decisions;
        expect(past.map((d) => [d[3], d[4]])).toEqual(past.map(() => [0, 1]));
      }),
    );
  }

  /**
   * Redis answers again: it decides (the first answer not degraded) and leases resume on
   * every worker; then (not before: one would take what is left) every worker asks until refused.
   */
  async recover(workers: LeaseWorker[]): Promise<void> {
    await Promise.all(
      workers.map(async (w) => {
        const back = this.keep(await w.run(0, 1200, { kind: 'redis', pauseMs: 50 })).decisions;
        expect(back.at(-1)?.[4]).toBe(0);
        expect(this.keep(await w.run(0, 200, { kind: 'held', units: 1, pauseMs: 50 })).held[0]).toBeGreaterThanOrEqual(1);
      }),
    );
    await Promise.all(workers.map(async (w) => this.keep(await w.run(0, 3 * L, { kind: 'refused', times: 3 }))));
  }

  async close(workers: LeaseWorker[] = this.workers): Promise<void> {
    for (const w of workers) {
      const closed = await w.close();
      expect(closed.code).toBe(0);
      for (const [what, n] of Object.entries(closed.errors)) this.errors[what] = (this.errors[what] ?? 0) + n;
    }
  }

  failed(what: string): number {
    return Object.entries(this.errors).reduce((s, [k, n]) => s + (k.startsWith(what) ? n : 0), 0);
  }

  /** Admissions in time order, and the units Redis counted (all instances closed). */
  async counts(prefix: string): Promise<{ admitted: [number, number][]; total: number; counted: number }> {
    const admitted = this.decisions
      .filter((d) => d[3] === 1)
      .map((d) => [d[1], d[2]] as [number, number])
      .sort((a, b) => a[0] - b[0]);
    const exact = new RedisStore({ client: admin, prefix, timeoutMs: 5000 });
    const plain = createLimiter({ rules: [{ ...RULE, key: () => 'k' }], store: exact });
    const counted = L - (await plain.get(RULE.name, 'k')).remaining;
    await exact.close();
    return { admitted, total: admitted.reduce((s, [, c]) => s + c, 0), counted };
  }
}

describe('leases while Redis is slow or gone (instances in separate processes)', () => {
  it('slow: held units answer without Redis, then the policy; when it is fast again leases resume; nothing is admitted that Redis did not count', async () => {
    const proxy = new DelayProxy(redis.port);
    await proxy.listen();
    const fleet = new Fleet();
    try {
      const workers = await fleet.start(2, { redis: { port: proxy.port }, prefix: 'lsl:' });
      const held = await fleet.lease(workers);
      proxy.delayMs = 5 * TIMEOUT_MS;
      await fleet.spend(workers, held);
      proxy.delayMs = 0;
      await fleet.recover(workers);
      await fleet.close();
    } finally {
      for (const w of fleet.workers) w.kill();
      await proxy.close();
    }
    const { admitted, total, counted } = await fleet.counts('lsl:');
    console.log(
      `lease-redis-faults slow: admitted ${total}, Redis counted ${counted} of ${L}; store errors ${JSON.stringify(fleet.errors)}`,
    );
    expect(mostInAny(admitted, W - TTL)).toBeLessThanOrEqual(L);
    expect(counted).toBeGreaterThanOrEqual(total);
    // Counted, never admitted: a refused request's call Redis ran after its deadline (its own
    // cost; what it leased beyond goes back), or a give-back that failed (at most max).
    expect(counted - total).toBeLessThanOrEqual(fleet.failed('consume') + MAX * fleet.failed('refund'));
  }, 180_000);

  it('gone: held units answer without Redis, then the policy; a failed give-back leaves its units counted; when Redis is back leases resume', async () => {
    const proxy = new DelayProxy(redis.port);
    const port = await proxy.listen();
    const fleet = new Fleet();
    let closingHeld = 0;
    try {
      // Nothing a client sends while Redis is gone is sent later: every call then fails at once.
      const workers = await fleet.start(3, { redis: { port }, prefix: 'lgo:', noOfflineQueue: true });
      const [a, b, c] = workers as [LeaseWorker, LeaseWorker, LeaseWorker];
      const held = await fleet.lease(workers);
      closingHeld = held[2] as number;
      await proxy.close();
      await fleet.spend([a, b], held);
      // An instance shutting down while Redis is gone: its give-back fails.
      await fleet.close([c]);
      expect(fleet.failed('refund')).toBeGreaterThanOrEqual(1);
      await proxy.listen(port);
      await fleet.recover([a, b]);
      await fleet.close([a, b]);
    } finally {
      for (const w of fleet.workers) w.kill();
      await proxy.close();
    }
    const { admitted, total, counted } = await fleet.counts('lgo:');
    const late = (fleet.errors['consume TG_STORE_TIMEOUT'] ?? 0) + MAX * (fleet.errors['refund TG_STORE_TIMEOUT'] ?? 0);
    console.log(
      `lease-redis-faults gone: admitted ${total}, ${closingHeld} held by the instance that closed, Redis counted ${counted} of ${L}; store errors ${JSON.stringify(fleet.errors)}`,
    );
    expect(mostInAny(admitted, W - TTL)).toBeLessThanOrEqual(L);
    // The closed instance's units stay counted: never admitted by the others.
    expect(counted).toBeGreaterThanOrEqual(total + closingHeld);
    // Beyond them, only calls that may have reached Redis after their deadline (none in a
    // run on an idle machine: then exactly). A call that failed at once was never sent.
    expect(counted - total - closingHeld).toBeLessThanOrEqual(late);
  }, 180_000);
});
