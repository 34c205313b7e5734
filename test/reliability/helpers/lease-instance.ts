/**
 * One instance of the lease check (lease-instances.test.ts), in its own process: a
 * RedisStore with a lease on the test's Redis, on Redis time, and a limiter of the given
 * rules (each counting one key). It replays a bounded trace of requests (times from the
 * start instant, rule, cost), each at its time without waiting for the ones before, and
 * reports every decision (rule, the decision's time, cost, admitted) and what it held
 * when done; then it closes the store (giving back what it holds) and exits. With
 * `hold`, it stops after the trace and reports, then waits to be killed.
 */
import { createLimiter, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';

export interface InstanceConfig {
  port: number;
  prefix: string;
  lease: { max: number; ttl: number } | undefined;
  instances: number;
  rules: Rule<unknown>[];
  /** [ms after the start, rule index, cost] */
  trace: [number, number, number][];
  /** The start instant (Date.now() time). */
  startAt: number;
  hold?: boolean;
}

export interface InstanceReport {
  type: 'done';
  /** [rule index, decision time (Redis time, ms), cost, 1 admitted / 0 refused] */
  decisions: [number, number, number, number][];
  held: number[];
  degraded: number;
}

const config = JSON.parse(process.argv[2] as string) as InstanceConfig;
const client = new Redis({ port: config.port, host: '127.0.0.1' });
const store = new RedisStore({
  client,
  prefix: config.prefix,
  timeoutMs: 5000,
  onStoreError: 'deny',
  instances: config.instances,
  ...(config.lease === undefined ? {} : { lease: config.lease }),
});
const limiters = config.rules.map((rule) => createLimiter({ rules: [{ ...rule, key: () => 'k' }], store }));

async function main(): Promise<void> {
  await new Promise((r) => client.once('ready', r));
  const decisions: InstanceReport['decisions'] = [];
  let degraded = 0;
  const inFlight: Promise<void>[] = [];
  const wait = config.startAt - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const start = performance.now();
  let next = 0;
  const trace = config.trace;
  // Each request goes out at its time (to the ms timer's precision), without awaiting the others.
  while (next < trace.length) {
    const elapsed = performance.now() - start;
    while (next < trace.length && (trace[next] as [number, number, number])[0] <= elapsed) {
      const [, ri, cost] = trace[next++] as [number, number, number];
      const lim = limiters[ri] as (typeof limiters)[number];
      inFlight.push(
        lim.consume({}, { cost }).then((d) => {
          if (d.degraded !== undefined) degraded++;
          decisions.push([ri, d.at, cost, d.allowed ? 1 : 0]);
        }),
      );
    }
    if (next < trace.length) {
      const due = (trace[next] as [number, number, number])[0] - (performance.now() - start);
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(due, 5))));
    }
  }
  await Promise.all(inFlight);
  const held = limiters.map((l) => store.leased(l.rules[0]?.spec as never, 'k'));
  const report: InstanceReport = { type: 'done', decisions, held, degraded };
  process.send?.(report);
  if (config.hold) return; // killed by the test, holding its leases
  await store.close();
  client.disconnect();
  process.disconnect?.();
}

void main();
