/**
 * Leases when an instance's wall clock steps (an NTP step), the instances in separate
 * processes deciding on Redis time: a lease's age is judged on the local wall clock
 * (`Date.now()`), so a step back to before the lease's call, or forward past its ttl, ends
 * the lease (its units go back, the next decision asks Redis), while a small step back
 * keeps it; the other instance is unaffected. The guarantee holds on the decisions' times
 * and Redis counted exactly what was admitted. Supplied-time steps on one store are in
 * packages/redis/test/lease.test.ts.
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { storeCallsOn } from '../setup/redis-paths.js';
import { type LeaseWorker, sleep, startLeaseWorker } from './helpers/children.js';
import { mostInAny } from './helpers/lease-guarantee.js';
import type { LeaseWorkerReply, WorkerDecision } from './helpers/lease-worker.js';

const L = 200;
const W = 3_600_000;
/** Long against the phases (and the sweep that ends expired leases runs once per ttl): a safety net for a slow machine, not a bound. */
const TTL = 300_000;
const MAX = 20;
const RULE: Rule<unknown> = { name: 'sl', algorithm: 'sliding-log', limit: L, window: W };

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

describe('leases when an instance wall clock steps (two instances in separate processes)', () => {
  it('a step back before the lease or forward past its ttl ends it (units back, Redis asked); a small step back keeps it; Redis counts exactly the admissions', async () => {
    const workers = await Promise.all(
      [0, 1].map(() =>
        startLeaseWorker({
          redis: { port: redis.port },
          prefix: 'lck:',
          lease: { max: MAX, ttl: TTL },
          instances: 2,
          rules: [RULE],
          onStoreError: 'deny',
          // No fault here: a deadline only against a hang.
          timeoutMs: 5000,
          breaker: { failures: 3, cooldownMs: 200 },
        }),
      ),
    );
    const [a, b] = workers as [LeaseWorker, LeaseWorker];
    const decisions: WorkerDecision[] = [];
    const keep = (r: LeaseWorkerReply) => {
      decisions.push(...r.decisions);
      return r;
    };
    const exact = new RedisStore({ client: admin, prefix: 'lck:', timeoutMs: 5000 });
    const plain = createLimiter({ rules: [{ ...RULE, key: () => 'k' }], store: exact });
    const admitted = () => decisions.reduce((s, d) => s + d[2] * d[3], 0);
    /** Store calls this test made to read Redis' count (each `get` is one). */
    let reads = 0;
    /** Redis' count once it is the admissions plus what the instances hold (a give-back is sent after the decision that ends a lease: polled, capped). */
    const settled = async (held: number) => {
      const counted = async () => {
        reads++;
        return L - (await plain.get(RULE.name, 'k')).remaining;
      };
      let c = await counted();
      for (let i = 0; i < 400 && c !== admitted() + held; i++) {
        await sleep(25);
        c = await counted();
      }
      return c;
    };
    /** Calls the instances made since `from` (the test's own reads taken out). */
    const callsSince = async (from: { calls: number; reads: number }) => (await storeCallsOn(admin)) - from.calls - (reads - from.reads);
    const mark = async () => ({ calls: await storeCallsOn(admin), reads });
    try {
      const held = await Promise.all(
        workers.map(async (w) => keep(await w.run(0, 200, { kind: 'held', units: 5, pauseMs: 50 })).held[0] as number),
      );
      for (const h of held) expect(h).toBeGreaterThanOrEqual(5);
      const heldB = held[1] as number;

      // A steps back 10 minutes, to before its lease's call: the lease ends, its units go back, A asks Redis.
      await a.stepClock(-600_000);
      let calls = await mark();
      const afterBack = keep(await a.run(0, 1));
      expect(afterBack.decisions.map((d) => [d[3], d[4]])).toEqual([[1, 0]]);
      expect(await settled(heldB + (afterBack.held[0] as number))).toBe(admitted() + heldB + (afterBack.held[0] as number));
      // The lease decided one request (the held run stops right after a lease call), so A
      // decides exactly, and the give-back rides that decision's batched call: one call.
      expect(await callsSince(calls)).toBe(1);

      // A steps forward 10 s, then back 5 s: its lease (grown again to 5 units or more) is
      // still younger than its ttl, and older than the step back, on this clock: it lasts, no call.
      let heldA = keep(await a.run(0, 200, { kind: 'held', units: 5, pauseMs: 50 })).held[0] as number;
      expect(heldA).toBeGreaterThanOrEqual(5);
      calls = await mark();
      for (const step of [10_000, -5000]) {
        await a.stepClock(step);
        const r = keep(await a.run(0, 1));
        expect(r.decisions.map((d) => [d[3], d[4]])).toEqual([[1, 0]]);
        expect(r.held[0]).toBe(--heldA);
      }
      expect(await callsSince(calls)).toBe(0);

      // B steps forward past the ttl: its lease has expired, its units go back, B asks Redis; A's lease is untouched.
      await b.stepClock(2 * TTL);
      calls = await mark();
      const afterForward = keep(await b.run(0, 1));
      expect(afterForward.decisions.map((d) => [d[3], d[4]])).toEqual([[1, 0]]);
      expect(await settled(heldA + (afterForward.held[0] as number))).toBe(admitted() + heldA + (afterForward.held[0] as number));
      // As A's above: an exact decision and the give-back in one call.
      expect(await callsSince(calls)).toBe(1);

      // Both ask far past the limit until Redis refuses them.
      await Promise.all(workers.map(async (w) => keep(await w.run(0, 3 * L, { kind: 'refused', times: 3 }))));
      for (const w of workers) expect((await w.close()).code).toBe(0);
      const times = decisions
        .filter((d) => d[3] === 1)
        .map((d) => [d[1], d[2]] as [number, number])
        .sort((x, y) => x[0] - y[0]);
      // Decisions are stamped on Redis time: the guarantee holds on them, whatever the local clocks did.
      expect(mostInAny(times, W - TTL)).toBeLessThanOrEqual(L);
      expect(await settled(0)).toBe(admitted());
      expect(admitted()).toBe(L);
    } finally {
      for (const w of workers) w.kill();
      await exact.close();
    }
  }, 180_000);
});
