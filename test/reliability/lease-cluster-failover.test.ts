/**
 * Leases through a Redis Cluster failover: three masters with a replica each, three
 * instances (separate processes, each its own RedisStore with `lease`, `onStoreError:
 * 'deny'`) hold leases of a sliding log and a token bucket on a key whose slot's master is
 * then SIGKILLed. Its replica is kept from taking over (`cluster-replica-no-failover`)
 * until the instances have spent what they hold, so the phases follow counts, not how fast
 * the Cluster fails over:
 * - every unit an instance holds is admitted from its lease, none degraded, and only then
 *   does the failure policy answer;
 * - once the replica is promoted, Redis decides again and leases resume;
 * - offline, from the admissions' times, each rule's guarantee holds across the failover,
 *   and the promoted replica counted every admission (none admitted twice).
 * The master is killed once its replica has acknowledged every write (WAIT): writes lost
 * by asynchronous replication are redis-cluster-failover.test.ts's subject.
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReplicatedCluster, rawCommand, startClusterWithReplicas } from '../setup/redis.js';
import { type LeaseWorker, sleep, startLeaseWorker } from './helpers/children.js';
import { bucketExcess, mostInAny } from './helpers/lease-guarantee.js';
import type { LeaseWorkerReply, WorkerDecision } from './helpers/lease-worker.js';

const L = 200;
const W = 3_600_000;
/** Long against the phases (and the sweep that ends expired leases runs once per ttl): a safety net for a slow machine, not a bound. */
const TTL = 300_000;
const MAX = 20;
const INSTANCES = 3;
const RULES: Rule<unknown>[] = [
  { name: 'sl', algorithm: 'sliding-log', limit: L, window: W },
  { name: 'tb', algorithm: 'token-bucket', limit: L, window: W },
];
/** Requests past the held units while the slot has no master: each answered by the policy. */
const PAST = 3;

let cluster: ReplicatedCluster;
beforeAll(async () => {
  cluster = await startClusterWithReplicas(1000);
});
afterAll(async () => {
  await cluster?.destroy();
});

describe('leases through a Redis Cluster failover (three instances in separate processes)', () => {
  it('held units answer while the master is down, then the policy; after the failover Redis decides and leases resume; the guarantee holds', async () => {
    const ports = cluster.nodes.map((n) => n.port);
    // Every rule's key is hash-tagged by the key: all in the slot of 'k'.
    const slot = Number((await rawCommand(ports[0] as number, 'CLUSTER KEYSLOT k')).slice(1));
    const victim = await cluster.masterOf(slot);
    const [replica] = await cluster.replicasOf(victim);
    if (replica === undefined) throw new Error('the victim has no replica');
    expect(await rawCommand(replica.port, 'CONFIG SET cluster-replica-no-failover yes')).toMatch(/^\+OK/);
    const workers: LeaseWorker[] = await Promise.all(
      Array.from({ length: INSTANCES }, () =>
        startLeaseWorker({
          redis: { cluster: ports },
          prefix: 'lcf:',
          lease: { max: MAX, ttl: TTL },
          instances: INSTANCES,
          rules: RULES,
          onStoreError: 'deny',
          timeoutMs: 500,
          breaker: { failures: 3, cooldownMs: 200 },
        }),
      ),
    );
    const decisions: WorkerDecision[] = [];
    /** Store errors of every instance, by operation and code. */
    const errors: Record<string, number> = {};
    const keep = (r: LeaseWorkerReply) => {
      decisions.push(...r.decisions);
      return r;
    };
    /** Runs `phase` on every worker at once, each rule in turn. */
    const each = <T>(phase: (w: LeaseWorker, ri: number, wi: number) => Promise<T>) =>
      Promise.all(
        workers.map(async (w, wi) => {
          const out: T[] = [];
          for (const ri of RULES.keys()) out.push(await phase(w, ri, wi));
          return out;
        }),
      );
    try {
      // 1. Every instance holds a lease of each rule.
      const held = await each(async (w, ri) => keep(await w.run(ri, 200, { kind: 'held', units: 5, pauseMs: 50 })).held[ri] as number);
      for (const h of held.flat()) expect(h).toBeGreaterThanOrEqual(5);
      const direct = new Redis({ port: victim.port, host: '127.0.0.1' });
      try {
        expect(await direct.dbsize()).toBeGreaterThan(0);
        // Every lease the master granted is on its replica before the kill.
        await direct.set('{k}fence', '1');
        expect(await direct.wait(1, 10_000)).toBe(1);
      } finally {
        direct.disconnect();
      }
      await victim.stop();

      // 2. The slot has no master: what each instance holds is admitted from its leases, then the policy answers.
      await each(async (w, ri, wi) => {
        const own = keep(await w.run(ri, held[wi]?.[ri] as number)).decisions;
        expect(own.map((d) => [d[3], d[4]])).toEqual(own.map(() => [1, 0]));
        const past = keep(await w.run(ri, PAST)).decisions;
        expect(past.map((d) => [d[3], d[4]])).toEqual(past.map(() => [0, 1]));
      });

      // 3. The replica takes over.
      expect(await rawCommand(replica.port, 'CONFIG SET cluster-replica-no-failover no')).toMatch(/^\+OK/);
      const deadline = Date.now() + 60_000;
      while ((await cluster.masterOf(slot).catch(() => undefined)) !== replica && Date.now() < deadline) await sleep(50);
      expect(await cluster.masterOf(slot)).toBe(replica);
      // Redis decides again (the first decision not degraded), and leases resume.
      const back = await each(async (w, ri) => {
        const r = keep(await w.run(ri, 1200, { kind: 'redis', pauseMs: 50 }));
        const resumed = keep(await w.run(ri, 200, { kind: 'held', units: 1, pauseMs: 50 }));
        return { recovered: r.decisions.at(-1)?.[4] === 0, held: resumed.held[ri] as number };
      });
      for (const b of back.flat()) {
        expect(b.recovered).toBe(true);
        expect(b.held).toBeGreaterThanOrEqual(1);
      }

      // 4. Every instance asks far past the limit, until Redis refuses it.
      await each(async (w, ri) => keep(await w.run(ri, 3 * L, { kind: 'refused', times: 3 })));
      // Each gives back what it holds and exits.
      for (const w of workers) {
        const closed = await w.close();
        expect(closed.code).toBe(0);
        for (const [what, n] of Object.entries(closed.errors)) errors[what] = (errors[what] ?? 0) + n;
      }
    } finally {
      for (const w of workers) w.kill();
    }

    // Offline: the guarantee across the failover, and Redis counted every admission.
    const admin = new Cluster(cluster.startupNodes);
    const exact = new RedisStore({ client: admin, prefix: 'lcf:', timeoutMs: 5000 });
    try {
      for (const [ri, rule] of RULES.entries()) {
        const admitted = decisions
          .filter((d) => d[0] === ri && d[3] === 1)
          .map((d) => [d[1], d[2]] as [number, number])
          .sort((a, b) => a[0] - b[0]);
        const total = admitted.reduce((s, [, c]) => s + c, 0);
        const plain = createLimiter({ rules: [{ ...rule, key: () => 'k' }], store: exact });
        const remaining = (await plain.get(rule.name, 'k')).remaining;
        console.log(
          `lease-cluster-failover: ${rule.name} admitted ${total}, Redis has ${remaining} of ${L} left; store errors ${JSON.stringify(errors)}`,
        );
        if (rule.algorithm === 'sliding-log') {
          expect(mostInAny(admitted, W - TTL)).toBeLessThanOrEqual(L);
          // Never admitted twice: the promoted replica counted at least every admission.
          const counted = L - remaining;
          expect(counted).toBeGreaterThanOrEqual(total);
          // Counted and never admitted: a refused request's call Redis ran after its deadline
          // (its own cost, as an exact call's; what it leased beyond goes back), or units whose
          // give-back failed (at most max each).
          const failed = (op: string) => Object.entries(errors).reduce((s, [what, n]) => s + (what.startsWith(op) ? n : 0), 0);
          expect(counted - total).toBeLessThanOrEqual(failed('consume') + MAX * failed('refund'));
        } else expect(bucketExcess(admitted, L, W, TTL)).toBeLessThanOrEqual(1e-9);
      }
    } finally {
      await exact.close();
      admin.disconnect();
    }
    // A cap for a hang only: every phase is counted.
  }, 180_000);
});
