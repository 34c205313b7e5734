/**
 * One instance of the lease fault tests (lease-*-faults.test.ts), in its own process: a
 * RedisStore with a lease on a standalone Redis (or a proxy in front of it) or a Cluster,
 * on Redis time, and a limiter per rule (each counting the key 'k'). Driven over IPC by
 * the test (children.ts `startLeaseWorker`), so every phase is bounded by counts, not by
 * wall time: `run` makes requests one after another until a count or a condition, and
 * answers with every decision and the units it holds after; `clock` steps this
 * process' wall clock (`Date.now`, which leases are aged on) as an NTP step would;
 * `close` closes the store (giving back what it holds) and the client, then exits.
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';

export interface LeaseWorkerConfig {
  redis: { port: number } | { cluster: number[] };
  prefix: string;
  lease: { max: number; ttl: number };
  instances: number;
  rules: Rule<unknown>[];
  onStoreError: 'allow' | 'deny' | 'local';
  timeoutMs: number;
  breaker: { failures: number; cooldownMs: number };
  /** Commands fail at once while the client is disconnected (nothing queued is sent later). */
  noOfflineQueue?: boolean;
}

/** When a `run` stops (besides its cap of `n` requests). */
export type RunUntil =
  /** After n requests. */
  | { kind: 'count' }
  /** Once this instance holds at least `units` of the rule's key, pausing `pauseMs` after each degraded decision. */
  | { kind: 'held'; units: number; pauseMs: number }
  /** At the first decision Redis made (not degraded), pausing `pauseMs` after each degraded one. */
  | { kind: 'redis'; pauseMs: number }
  /** After `times` refusals in a row decided without the failure policy. */
  | { kind: 'refused'; times: number };

export type LeaseWorkerCommand =
  | { type: 'run'; id: number; rule: number; n: number; until: RunUntil }
  | { type: 'clock'; id: number; stepMs: number }
  | { type: 'close'; id: number };

/** A decision: [rule index, decision time (ms), cost, 1 admitted / 0 refused, 1 degraded / 0]. */
export type WorkerDecision = [number, number, number, number, number];

export interface LeaseWorkerReply {
  type: 'reply';
  id: number;
  decisions: WorkerDecision[];
  /** Units held per rule after the command. */
  held: number[];
  /** Store errors so far, by operation and code (`consume TG_STORE_TIMEOUT`; else the error's first word). */
  errors: Record<string, number>;
}

const config = JSON.parse(process.argv[2] as string) as LeaseWorkerConfig;
const conn = config.redis;
const client =
  'port' in conn
    ? new Redis({
        port: conn.port,
        host: '127.0.0.1',
        ...(config.noOfflineQueue ? { enableOfflineQueue: false, maxRetriesPerRequest: 0 } : {}),
      })
    : new Cluster(
        conn.cluster.map((port) => ({ host: '127.0.0.1', port })),
        // Follows a failover soon, as the reliability app does (app.ts).
        {
          clusterRetryStrategy: () => 50,
          redisOptions: { maxRetriesPerRequest: 1 },
          slotsRefreshTimeout: 500,
          slotsRefreshInterval: 1000,
        },
      );
client.on('error', () => {});
const store = new RedisStore({
  client,
  prefix: config.prefix,
  timeoutMs: config.timeoutMs,
  onStoreError: config.onStoreError,
  breaker: config.breaker,
  instances: config.instances,
  lease: config.lease,
});
const errors: Record<string, number> = {};
store.on('error', (e) => {
  const err = e.error as { code?: string; message?: string };
  const what = `${e.operation} ${err.code ?? String(err.message).split(' ')[0]}`;
  errors[what] = (errors[what] ?? 0) + 1;
});
const limiters = config.rules.map((rule) => createLimiter({ rules: [{ ...rule, key: () => 'k' }], store }));
const held = () => limiters.map((l) => store.leased(l.rules[0]?.spec as never, 'k'));

// The wall clock leases are aged on, stepped by `clock` (Redis time is not touched).
const realNow = Date.now;
let step = 0;
Date.now = () => realNow() + step;

async function run(ri: number, n: number, until: RunUntil): Promise<WorkerDecision[]> {
  const lim = limiters[ri] as (typeof limiters)[number];
  const out: WorkerDecision[] = [];
  let refusals = 0;
  for (let i = 0; i < n; i++) {
    if (until.kind === 'held' && (held()[ri] as number) >= until.units) break;
    const d = await lim.consume({});
    const degraded = d.degraded === undefined ? 0 : 1;
    out.push([ri, d.at, 1, d.allowed ? 1 : 0, degraded]);
    if (until.kind === 'redis' && degraded === 0) break;
    // A busy machine can miss a deadline: the breaker's cooldown passes rather than the cap.
    if ((until.kind === 'redis' || until.kind === 'held') && degraded === 1) await new Promise((r) => setTimeout(r, until.pauseMs));
    if (until.kind === 'refused') {
      refusals = !d.allowed && degraded === 0 ? refusals + 1 : 0;
      if (refusals >= until.times) break;
    }
  }
  return out;
}

async function main(): Promise<void> {
  await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  process.on('message', async (cmd: LeaseWorkerCommand) => {
    let decisions: WorkerDecision[] = [];
    if (cmd.type === 'run') decisions = await run(cmd.rule, cmd.n, cmd.until);
    else if (cmd.type === 'clock') step += cmd.stepMs;
    else {
      await store.close();
      client.disconnect();
    }
    const reply: LeaseWorkerReply = { type: 'reply', id: cmd.id, decisions, held: held(), errors: { ...errors } };
    process.send?.(reply);
    if (cmd.type === 'close') process.disconnect?.();
  });
  process.send?.({ type: 'ready' });
}

void main();
