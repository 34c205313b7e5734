/**
 * Leases across processes: four instances (separate processes, each its own RedisStore
 * with `lease`) on one Redis replay a bounded trace of Poisson arrivals with weighted
 * costs, far above every limit, on Redis time. Offline, from the decisions' times:
 * - each algorithm's guarantee holds with intervals shortened by ttl (a sliding log admits
 *   at most L in any W - ttl; a token bucket and the leaky meter at most B + r·(T + ttl) in
 *   T; fixed and sliding windows at most L per window and sliding buckets at most L in
 *   any W - b: their leases end with the window or block they were counted in);
 * - near the limit they admit exactly the limit: every fixed window wholly inside the run
 *   admits exactly L, and each algorithm's total is within instances × max of what exact
 *   decisions (MemoryStore, replaying every request of the run in time order) admit (the
 *   buckets: never above it by more, below it by what expired leases' give-backs lost).
 * An instance killed holding a lease: its units stay counted (never admitted twice), and
 * another instance then admits exactly what is left.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createLimiter, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prng } from '../conformance/store-contract.js';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { storeCallsOn } from '../setup/redis-paths.js';
import { bucketExcess, mostInAny } from './helpers/lease-guarantee.js';
import type { InstanceConfig, InstanceReport } from './helpers/lease-instance.js';

const loader = fileURLToPath(new URL('./helpers/ts-loader.mjs', import.meta.url));
const instancePath = fileURLToPath(new URL('./helpers/lease-instance.ts', import.meta.url));

const W = 2000;
const L = 100;
const TTL = 100;
const MAX = 10;
const INSTANCES = 4;
const RUN_MS = 6000;

const RULES: Rule<unknown>[] = [
  { name: 'fw', algorithm: 'fixed-window', limit: L, window: W },
  { name: 'sl', algorithm: 'sliding-log', limit: L, window: W },
  { name: 'sw', algorithm: 'sliding-window', limit: L, window: W },
  { name: 'tb', algorithm: 'token-bucket', limit: L, window: W },
  { name: 'lm', algorithm: 'leaky-bucket', limit: L, window: W },
  { name: 'sb', algorithm: 'sliding-buckets', limit: L, window: W, buckets: 10 },
];
/** sliding-buckets' block: W / buckets. */
const B_MS = W / 10;

let redis: RedisServer;
let admin: Redis;
const live = new Set<ChildProcess>();

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis({ port: redis.port, host: '127.0.0.1' });
});

afterAll(async () => {
  for (const c of live) c.kill('SIGKILL');
  admin.disconnect();
  await redis?.destroy();
});

/** Poisson arrivals at `perSecond` for each rule over `ms`; costs 1 (80 %), 2 (15 %) or 3. */
function trace(seed: number, rules: number, perSecond: number, ms: number): [number, number, number][] {
  const rnd = prng(seed);
  const out: [number, number, number][] = [];
  for (let ri = 0; ri < rules; ri++) {
    for (let t = -Math.log(1 - rnd()) * (1000 / perSecond); t < ms; t += -Math.log(1 - rnd()) * (1000 / perSecond)) {
      const u = rnd();
      out.push([Math.floor(t), ri, u < 0.8 ? 1 : u < 0.95 ? 2 : 3]);
    }
  }
  return out.sort((a, b) => a[0] - b[0]);
}

interface Instance {
  child: ChildProcess;
  report: Promise<InstanceReport>;
  exited: Promise<number | null>;
}

function startInstance(config: InstanceConfig): Instance {
  const child = fork(instancePath, [JSON.stringify(config)], {
    execArgv: ['--import', loader],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  live.add(child);
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      live.delete(child);
      r(code);
    }),
  );
  const report = new Promise<InstanceReport>((resolve, reject) => {
    child.on('message', (m: InstanceReport) => {
      if (m.type === 'done') resolve(m);
    });
    child.once('exit', (code) => reject(new Error(`instance exited with ${code} before reporting`)));
  });
  return { child, report, exited };
}

/** What exact decisions admit on the same requests in time order (MemoryStore, supplied clock). */
async function exactAdmitted(rule: Rule<unknown>, requests: [number, number][]): Promise<number> {
  const clock = new ManualClock(0);
  const store = new MemoryStore();
  const limiter = createLimiter({ rules: [{ ...rule, key: () => 'k' }], store, clock });
  let admitted = 0;
  for (const [t, cost] of requests) {
    clock.set(t);
    if ((await limiter.consume({}, { cost })).allowed) admitted += cost;
  }
  await store.close();
  return admitted;
}

describe('four instances in separate processes share one Redis through leases', () => {
  it('every algorithm keeps its guarantee shortened by ttl, and admits what exact decisions admit within instances × max', async () => {
    const before = await storeCallsOn(admin);
    const startAt = Date.now() + 3000;
    const instances = Array.from({ length: INSTANCES }, (_, i) =>
      startInstance({
        port: redis.port,
        prefix: 'li:',
        lease: { max: MAX, ttl: TTL },
        instances: INSTANCES,
        rules: RULES,
        // 100 requests per second per rule and instance: 8 times the limit's 50 per second.
        trace: trace(1000 + i, RULES.length, 100, RUN_MS),
        startAt,
      }),
    );
    const reports = await Promise.all(instances.map((x) => x.report));
    for (const x of instances) expect(await x.exited).toBe(0);
    const calls = (await storeCallsOn(admin)) - before;
    const all = reports.flatMap((r) => r.decisions);
    expect(reports.every((r) => r.degraded === 0)).toBe(true);
    // Every instance gave back what it held (close) before exiting.
    const decisions = all.length;
    console.log(`lease-instances: ${decisions} decisions, ${calls} store calls (${(calls / decisions).toFixed(3)} per decision)`);

    for (const [ri, rule] of RULES.entries()) {
      const mine = all.filter((d) => d[0] === ri).sort((a, b) => a[1] - b[1]);
      const admitted = mine.filter((d) => d[3] === 1).map((d) => [d[1], d[2]] as [number, number]);
      const total = admitted.reduce((s, [, c]) => s + c, 0);
      const name = rule.name;
      if (name === 'fw' || name === 'sw') {
        // At most L per window (a lease ends with its window); a whole fixed window inside
        // the run, asked 8 times its limit, admits exactly L.
        const per = new Map<number, number>();
        for (const [t, c] of admitted) per.set(Math.floor(t / W), (per.get(Math.floor(t / W)) ?? 0) + c);
        for (const [k, sum] of per) expect(sum, `${name} window ${k}`).toBeLessThanOrEqual(L);
        if (name === 'fw') {
          const first = Math.ceil((mine[0] as [number, number, number, number])[1] / W);
          const last = Math.floor((mine[mine.length - 1] as [number, number, number, number])[1] / W);
          expect(last - first, 'whole windows in the run').toBeGreaterThanOrEqual(1);
          // The last admissions of a window can be one cost short of L (a cost of 2 or 3 refused at L - 1).
          for (let k = first; k < last; k++) expect(per.get(k) ?? 0, `fw window ${k}`).toBeGreaterThanOrEqual(L - 2);
        }
      } else if (name === 'sl' || name === 'sb') {
        // At most L in any interval of W - ttl (sliding log); of W - b (sliding buckets: a
        // lease ends with the block it was counted in, so its bound is unchanged).
        const span = name === 'sl' ? W - TTL : W - B_MS;
        const most = mostInAny(admitted, span);
        expect(most, `${name}: most admitted in any ${span} ms`).toBeLessThanOrEqual(L);
      } else {
        // At most B + r·(T + ttl) in any interval T.
        const worst = bucketExcess(admitted, L, W, TTL);
        expect(worst, `${name}: most admitted in T less B + r·(T + ttl)`).toBeLessThanOrEqual(1e-9);
      }
      const exact = await exactAdmitted(
        rule,
        mine.map((d) => [d[1], d[2]]),
      );
      console.log(`lease-instances: ${name} admitted ${total} units, exact decisions on the same requests ${exact}`);
      // Never more than exact decisions admit beyond the units held at once.
      expect(total - exact, `${name}: leased ${total} vs exact ${exact}`).toBeLessThanOrEqual(INSTANCES * MAX);
      if (name === 'tb' || name === 'lm') {
        // A bucket gets back what a lease's unused units still weigh (their cost less what
        // refilled since): leases that expire unused lose a little, more when the instances
        // lag behind their trace (a loaded machine).
        expect(total, `${name}: leased ${total} vs exact ${exact}`).toBeGreaterThanOrEqual(0.8 * exact);
      } else expect(exact - total, `${name}: leased ${total} vs exact ${exact}`).toBeLessThanOrEqual(INSTANCES * MAX);
    }
  }, 180_000);

  it('an instance killed holding a lease: its units stay counted, and another instance admits exactly what is left', async () => {
    const rule: Rule<unknown> = { name: 'k', algorithm: 'sliding-log', limit: 300, window: '1m' };
    const startAt = Date.now() + 2000;
    const a = startInstance({
      port: redis.port,
      prefix: 'lk:',
      lease: { max: 50, ttl: 1000 },
      instances: 2,
      rules: [rule],
      trace: Array.from({ length: 20 }, (_, i) => [i * 5, 0, 1] as [number, number, number]),
      startAt,
      hold: true,
    });
    const ra = await a.report;
    const admittedA = ra.decisions.filter((d) => d[3] === 1).length;
    const heldA = ra.held[0] as number;
    expect(heldA).toBeGreaterThan(0);
    a.child.kill('SIGKILL');
    await a.exited;
    const exact = new RedisStore({ client: admin, prefix: 'lk:', timeoutMs: 5000 });
    const plain = createLimiter({ rules: [{ ...rule, key: () => 'k' }], store: exact });
    // Its held units are still counted in Redis.
    expect((await plain.get('k', 'k')).remaining).toBe(300 - admittedA - heldA);
    const b = startInstance({
      port: redis.port,
      prefix: 'lk:',
      lease: { max: 50, ttl: 1000 },
      instances: 2,
      rules: [rule],
      trace: Array.from({ length: 600 }, (_, i) => [Math.floor(i / 4), 0, 1] as [number, number, number]),
      startAt: Date.now() + 1000,
    });
    const rb = await b.report;
    expect(await b.exited).toBe(0);
    const admittedB = rb.decisions.filter((d) => d[3] === 1).length;
    expect(admittedB).toBe(300 - admittedA - heldA);
    await exact.close();
  }, 120_000);
});
