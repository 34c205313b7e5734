/**
 * Redis Cluster failover under load (issue 9, item 1; issue 19). Three masters with
 * one replica each (cluster-node-timeout 1000 ms). An Express and a Fastify app (child
 * processes, `onStoreError: 'local'`) count every request under one hot key while the
 * master serving that key's slot is SIGKILLed; its replica takes over. It runs on every
 * client the store takes (ioredis `Cluster`, node-redis 5 and 6 `createCluster`), each on
 * a Cluster of its own.
 *
 * Decisions continue throughout (no 5xx, no hung request) and return to Redis on the
 * promoted replica. What the failover costs is measured, not hidden: admissions Redis
 * never counted = the 200s minus the counter on the new master. They come from the
 * local fallback (answers marked degraded) and from writes the old master acknowledged
 * but had not yet replicated (asynchronous replication). Both figures are printed and
 * recorded in docs/reliability.md. Then the promoted master loses the function library
 * (FUNCTION FLUSH): the next call to the slot loads it there and is decided by Redis.
 */
import { STORE_LIBRARY_NAME } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS } from '../setup/clients.js';
import { type RedisServer, type ReplicatedCluster, rawCommand, startClusterWithReplicas } from '../setup/redis.js';
import { sleep, startApp, startLoad, summarize } from './helpers/children.js';
import type { LoadResult } from './helpers/load.js';

const TIMEOUT_MS = 100;
/** Answers each app gives before the kill, and after the failover settled: counts, not sleeps, so a busy machine cannot shorten a phase. */
const BEFORE = 150;
const AFTER = 100;
const SETTLED = 20;
const LIMIT = 100_000;
const FRAMEWORKS = ['express', 'fastify'] as const;

describe.each(CLIENTS)('Redis Cluster on $name: a master killed mid-load, its replica promoted', ({ name: client }) => {
  let cluster: ReplicatedCluster;
  beforeAll(async () => {
    cluster = await startClusterWithReplicas(1000);
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  /**
   * node-redis 5 asks the Cluster for its slots only when a reply says MOVED or ASK, and
   * the killed master's address answers nothing: it never learns of the promotion by
   * itself (node-redis 6 asks again once a node has been reconnecting for a while,
   * `topologyRefreshOnReconnectionAttemptStrategy`; ioredis on a connection error).
   */
  const followsFailover = client !== 'node-redis 5';

  it('decisions continue, return to Redis on the new master, and the uncounted admissions are reported', async () => {
    // The rule's storage id names its kind: fa3600000 is a first-request fixed window of 1 h.
    const keyOf = (framework: string) => `fo-${framework}:tg:hot:fa3600000{all}`;
    const slot = Number((await rawCommand(cluster.nodes[0]!.port, `CLUSTER KEYSLOT ${keyOf('express')}`)).slice(1));
    const victim = await cluster.masterOf(slot);
    const [replica] = await cluster.replicasOf(victim);
    expect(replica).toBeDefined();
    const apps = await Promise.all(
      FRAMEWORKS.map((framework) =>
        startApp({
          framework,
          client,
          redis: { cluster: cluster.nodes.map((n) => n.port) },
          onStoreError: 'local',
          timeoutMs: TIMEOUT_MS,
          breaker: { failures: 3, cooldownMs: 200 },
          storePrefix: `fo-${framework}:`,
          rules: [{ name: 'hot', keyBy: 'const', limit: LIMIT, window: '1h', algorithm: 'fixed-window', align: 'first-request' }],
        }),
      ),
    );
    const admin = new Cluster(cluster.startupNodes, { clusterRetryStrategy: () => 100 });
    admin.on('error', () => {});
    try {
      const loads = apps.map((app) =>
        // durationMs and maxRequests are only caps: the load stops when told.
        startLoad({ ports: [app.port], workers: 4, pauseMs: 8, durationMs: 50_000, maxRequests: 20_000, requestTimeoutMs: 3000 }),
      );
      await Promise.all(loads.map((l) => l.started));
      // Where each load was at the kill and once settled, by its own count of answers.
      const beforeKill = await Promise.all(loads.map((l) => l.answered(BEFORE)));
      await victim.stop();
      const killedAt = Date.now();
      // Promotion: the replica serves the slot once the others agree the master failed.
      let promotedAt = 0;
      while (Date.now() - killedAt < 10_000) {
        const m = await cluster.masterOf(slot).catch(() => undefined);
        if (m && m !== victim) {
          expect(m).toBe(replica);
          promotedAt = Date.now();
          break;
        }
        await sleep(50);
      }
      expect(promotedAt).toBeGreaterThan(0);
      // From when Redis can decide again: the promotion, or for node-redis 5 the old
      // master's address answering again (restarted, it rejoins as a replica and answers
      // MOVED, from which node-redis 5 learns the new master).
      let backFrom = promotedAt;
      if (!followsFailover) {
        await victim.start();
        backFrom = Date.now();
      }
      // Settled once each app gave SETTLED answers in a row decided by Redis (counted, not slept:
      // a busy machine takes longer to follow, and a breaker that closes may open again while
      // the client still learns the new topology), then AFTER more answers from there on.
      const settled = await Promise.all(loads.map((l) => l.answered(SETTLED, { clean: true })));
      await Promise.all(loads.map((l) => l.answered(AFTER)));
      const results = await Promise.all(loads.map((l) => l.stop()));

      for (const [i, framework] of FRAMEWORKS.entries()) {
        const r = results[i] as LoadResult;
        const s = summarize(r);
        const admitted = r.status.filter((x) => x === 200).length;
        const degraded = r.degraded.filter((x, j) => x === 1 && r.status[j] === 200).length;
        // The counter as Redis holds it now, read through the app's store (peek consumes nothing).
        const peek = (await (await fetch(`http://127.0.0.1:${apps[i]!.port}/peek`)).json()) as {
          degraded?: string;
          rules: { remaining: number }[];
        };
        expect(peek.degraded).toBeUndefined();
        const counted = LIMIT - (peek.rules[0]?.remaining ?? Number.NaN);
        expect(await admin.exists(keyOf(framework))).toBe(1);
        // Answers once the failover was over (SETTLED in a row from Redis), and before the kill on
        // a healthy Cluster, split by the load's own count (results are in answer order).
        const settledAt = settled[i]!;
        const after = r.status.flatMap((_x, j) => (j >= settledAt.index ? [j] : []));
        const afterDegraded = after.filter((j) => r.degraded[j] === 1).length;
        const before = r.status.flatMap((_x, j) => (j < beforeKill[i]!.index ? [j] : []));
        const beforeDegraded = before.filter((j) => r.degraded[j] === 1).length;
        // What the store met once the failover settled (the load's clock; one machine): a missed
        // deadline is the machine's load, anything else (CLUSTERDOWN, a refused connection) the topology.
        const errorsAfter = (await apps[i]!.stats()).storeErrors.filter(([, at]) => at >= settledAt.at).map(([code]) => code);
        const timeoutsAfter = errorsAfter.filter((c) => c === 'TG_STORE_TIMEOUT').length;
        console.log(
          `[failover] ${client}, ${framework}: ${JSON.stringify(s)}; promoted ${promotedAt - killedAt} ms after the kill; ` +
            `${followsFailover ? '' : `old master restarted ${backFrom - killedAt} ms after the kill; `}admitted ${admitted}, by the local fallback ${degraded}, counted by Redis ${counted}, uncounted ${admitted - counted} (lost writes ${admitted - counted - degraded}); ` +
            `degraded before the kill ${beforeDegraded}/${before.length}, after failover ${afterDegraded}/${after.length} ` +
            `(store errors after it ${JSON.stringify(Object.fromEntries([...new Set(errorsAfter)].map((c) => [c, errorsAfter.filter((x) => x === c).length])))}); ` +
            `breaker ${apps[i]!.breakerChanges().join(' ')}`,
        );
        expect(s.byStatus).toEqual({ 200: s.total });
        expect(s.max).toBeLessThanOrEqual(3000);
        expect(degraded).toBeGreaterThan(0);
        // Requests sent after the failover settled are decided by Redis again: the store meets no
        // error of the topology any more (a client that did not follow the failover would), and an
        // answer from the fallback there follows a missed deadline (with the breaker's cooldown
        // after it), which a busy machine causes at any time: bounded by what the store met, not
        // by a share of wall time.
        expect(errorsAfter.filter((c) => c !== 'TG_STORE_TIMEOUT')).toEqual([]);
        if (afterDegraded > 0) expect(timeoutsAfter).toBeGreaterThan(0);
        expect(afterDegraded).toBeLessThan(after.length);
        // Uncounted admissions are the fallback's and lost writes, never negative.
        expect(counted).toBeLessThanOrEqual(admitted);
      }

      // The promoted replica got the library by replication. Lose it there (as a replica
      // freshly started or flushed would not have it): the next call to the slot loads it
      // on the new master and is decided by Redis, on every app.
      const promoted = replica as RedisServer;
      expect(await rawCommand(promoted.port, 'FUNCTION FLUSH')).toMatch(/^\+OK/);
      for (const app of apps) {
        let peek: { degraded?: string } = { degraded: 'not asked' };
        for (let i = 0; i < 50 && peek.degraded !== undefined; i++) {
          peek = (await (await fetch(`http://127.0.0.1:${app.port}/peek`)).json()) as { degraded?: string };
          if (peek.degraded !== undefined) await sleep(100);
        }
        expect(peek.degraded).toBeUndefined();
      }
      const direct = new Redis({ port: promoted.port, host: '127.0.0.1' });
      try {
        expect(await direct.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)).toHaveLength(1);
      } finally {
        direct.disconnect();
      }
    } finally {
      admin.disconnect();
      for (const app of apps) expect(await app.stop()).toBe(0);
    }
    // A cap for a hang only: the phases are driven by counts, and on a busy machine starting the
    // apps, the loads and the Cluster's promotion took 58 s for one client (load average 23 on 2 cores).
  }, 180_000);
});
