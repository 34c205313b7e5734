/**
 * The simulator (SPEC 11): runs a policy on a virtual clock.
 *
 * It is production code on a `ManualClock`: `createLimiter` with a `MemoryStore`, the
 * same stack engine and algorithms the middleware uses. For each arrival the clock is
 * set to the arrival time and the request is consumed; nothing is re-implemented, so
 * the prediction is what a single instance with the memory store would decide.
 */
import { type CompiledRule, compileRules, createLimiter, ManualClock, MemoryStore } from '@tollgate/core';
import type { Arrival } from './arrivals.js';
import type { Policy } from './policy.js';
import { type RequestRecord, type Summary, summarize } from './stats.js';

export interface SimulateOptions {
  /** Length of the sliding interval for the busiest-interval figure, ms. @default the first rule's window */
  intervalMs?: number;
  /** Called every `progressEvery` requests and once at the end. */
  onProgress?: (done: number, total: number) => void;
  /** @default 10_000 */
  progressEvery?: number;
}

export interface SimulationResult {
  policy: string;
  records: RequestRecord[];
  summary: Summary;
}

/** The window of a policy's first rule, the default interval and boundary target. */
export function firstWindow(policy: Policy): { limit: number; windowMs: number } {
  const spec = (compileRules(policy.rules, 'sim')[0] as CompiledRule<Arrival>).spec;
  return { limit: spec.limit, windowMs: spec.windowMs };
}

/**
 * Decides every arrival with the real limiter.
 * @example
 * const { summary } = await simulate(policyFromFlags('fixed-window', { rate: '10/s' }), arrivals);
 */
export async function simulate(policy: Policy, arrivals: readonly Arrival[], options: SimulateOptions = {}): Promise<SimulationResult> {
  const clock = new ManualClock(0);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  const limiter = createLimiter<Arrival>({ rules: policy.rules, store, clock });
  const intervalMs = options.intervalMs ?? limiter.rules[0]?.spec.windowMs ?? 1000;
  const every = options.progressEvery ?? 10_000;
  const records: RequestRecord[] = new Array(arrivals.length);
  try {
    for (let i = 0; i < arrivals.length; i++) {
      const a = arrivals[i] as Arrival;
      clock.set(a.t);
      const d = await limiter.consume(a);
      const decision = !d.allowed ? 'rejected' : d.delayMs > 0 ? 'delayed' : 'admitted';
      records[i] = {
        i,
        arrival: a.t,
        key: a.key,
        cost: a.cost,
        decision,
        delayMs: d.delayMs,
        departure: d.allowed ? a.t + d.delayMs : null,
        rules: d.allowed ? d.rules.filter((r) => r.delayMs > 0).map((r) => r.name) : d.rejectedBy,
        retryAfterMs: d.retryAfterMs,
      };
      if (options.onProgress && (i + 1) % every === 0) options.onProgress(i + 1, arrivals.length);
    }
  } finally {
    await store.close();
  }
  options.onProgress?.(arrivals.length, arrivals.length);
  return { policy: policy.name, records, summary: summarize(records, intervalMs) };
}
