/**
 * The simulator: runs a policy on a virtual clock.
 *
 * It is production code on a `ManualClock`: `createLimiter` with a `MemoryStore`, the
 * same stack engine and algorithms the middleware uses, and core's `createThrottle`
 * for a policy with a throttle. Nothing is re-implemented, so the prediction is what
 * a single instance with the memory store decides. Given stores (`compare --lease`: one
 * RedisStore per instance), each instance is its own limiter on its own store.
 *
 * Without a throttle, each arrival is decided at its arrival time. With one, the
 * throttle counts the arrival when it arrives and the rules decide the request when
 * its throttle delay is over (a limiter behind a throttle counts at
 * processing time), so events are replayed in time order: arrivals, and delayed
 * requests reaching the rules. Ties go to the request that was delayed first, as
 * Node's timers fire in the order they were set.
 */
import {
  type CompiledRule,
  compileRules,
  createLimiter,
  createThrottle,
  type Decision,
  type Limiter,
  ManualClock,
  MemoryStore,
  type Store,
  type Throttle,
} from '@tollgate/core';
import type { Arrival } from './arrivals.js';
import type { Policy, PolicyThrottle } from './policy.js';
import { type RequestRecord, type Summary, summarize } from './stats.js';

export interface SimulateOptions {
  /** Length of the sliding interval for the busiest-interval figure, ms. @default the first rule's window */
  intervalMs?: number;
  /** Called every `progressEvery` requests and once at the end. */
  onProgress?: (done: number, total: number) => void;
  /** @default 10_000 */
  progressEvery?: number;
  /**
   * Instances deciding on shared stores (`compare --lease`): one limiter (and throttle) per
   * store, each arrival decided by the instance `instanceOf[i]`. The caller closes them.
   * @default one instance on a fresh MemoryStore
   */
  stores?: readonly Store[];
  /** The instance of each arrival, with `stores`. @default all at the first */
  instanceOf?: ArrayLike<number>;
}

export interface SimulationResult {
  policy: string;
  records: RequestRecord[];
  summary: Summary;
}

/**
 * The limit and window a boundary attack aims at, and the default interval: the first
 * rule's, or for a throttle-only policy its `delayAfter` and window.
 */
export function firstWindow(policy: Policy): { limit: number; windowMs: number } {
  const first = policy.rules.length > 0 ? (compileRules(policy.rules, 'sim')[0] as CompiledRule<Arrival>).spec : undefined;
  if (first) return { limit: first.limit, windowMs: first.windowMs };
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  const t = createThrottle({ ...(policy.throttle as NonNullable<Policy['throttle']>), store });
  void store.close();
  return { limit: Math.max(1, t.delayAfter), windowMs: t.windowMs };
}

/** Requests held by the throttle, ordered by the time they reach the rules, then by arrival. */
class Waiting {
  readonly #heap: { at: number; i: number; delay: number }[] = [];

  get size(): number {
    return this.#heap.length;
  }

  peek(): { at: number; i: number; delay: number } | undefined {
    return this.#heap[0];
  }

  #less(a: number, b: number): boolean {
    const x = this.#heap[a] as { at: number; i: number };
    const y = this.#heap[b] as { at: number; i: number };
    return x.at < y.at || (x.at === y.at && x.i < y.i);
  }

  #swap(a: number, b: number): void {
    const h = this.#heap;
    [h[a], h[b]] = [h[b] as (typeof h)[number], h[a] as (typeof h)[number]];
  }

  push(item: { at: number; i: number; delay: number }): void {
    this.#heap.push(item);
    let k = this.#heap.length - 1;
    while (k > 0 && this.#less(k, (k - 1) >> 1)) {
      this.#swap(k, (k - 1) >> 1);
      k = (k - 1) >> 1;
    }
  }

  pop(): { at: number; i: number; delay: number } | undefined {
    const top = this.#heap[0];
    const last = this.#heap.pop();
    if (this.#heap.length > 0 && last !== undefined) {
      this.#heap[0] = last;
      let k = 0;
      for (;;) {
        const l = 2 * k + 1;
        const r = l + 1;
        let m = k;
        if (l < this.#heap.length && this.#less(l, m)) m = l;
        if (r < this.#heap.length && this.#less(r, m)) m = r;
        if (m === k) break;
        this.#swap(k, m);
        k = m;
      }
    }
    return top;
  }
}

/** Reserves arrival `a`'s cost and, when admitted, settles it at `actual` (a debt when more). */
async function reserved(limiter: Limiter<Arrival>, a: Arrival, actual: number): Promise<Decision> {
  const r = await limiter.reserve(a);
  if (r.allowed) await r.settle(actual);
  return r.decision;
}

/**
 * Decides every arrival with the real limiter (and throttle).
 * @example
 * const { summary } = await simulate(policyFromFlags('fixed-window', { rate: '10/s' }), arrivals);
 */
export async function simulate(policy: Policy, arrivals: readonly Arrival[], options: SimulateOptions = {}): Promise<SimulationResult> {
  const clock = new ManualClock(0);
  const own = options.stores === undefined ? new MemoryStore({ clock, sweepIntervalMs: 0 }) : undefined;
  const stores = options.stores ?? [own as Store];
  const instanceOf = options.instanceOf;
  const limiters = policy.rules.length > 0 ? stores.map((store) => createLimiter<Arrival>({ rules: policy.rules, store, clock })) : [];
  const throttles: Throttle<Arrival>[] = policy.throttle
    ? stores.map((store) => createThrottle<Arrival>({ ...(policy.throttle as PolicyThrottle), store, clock }))
    : [];
  const limiter = limiters[0];
  const throttle = throttles[0];
  const intervalMs = options.intervalMs ?? limiter?.rules[0]?.spec.windowMs ?? throttle?.windowMs ?? 1000;
  const every = options.progressEvery ?? 10_000;
  const records: RequestRecord[] = new Array(arrivals.length);
  let done = 0;

  /** The rules decide arrival `i` now, after `held` ms in the throttle. */
  async function decide(i: number, held: number): Promise<void> {
    const a = arrivals[i] as Arrival;
    const instance = instanceOf === undefined ? 0 : (instanceOf[i] as number);
    const heldBy = held > 0 && throttle ? [throttle.name] : [];
    if (!limiter) {
      records[i] = {
        i,
        arrival: a.t,
        key: a.key,
        cost: a.cost,
        decision: held > 0 ? 'delayed' : 'admitted',
        delayMs: held,
        departure: a.t + held,
        rules: heldBy,
        retryAfterMs: 0,
      };
    } else {
      // A trace's actual cost: the arrival's cost is reserved, then settled at once.
      const deciding = limiters[instance] as Limiter<Arrival>;
      const d = a.actual === undefined ? await deciding.consume(a) : await reserved(deciding, a, a.actual);
      const delayMs = d.allowed ? held + d.delayMs : held;
      records[i] = {
        i,
        arrival: a.t,
        key: a.key,
        cost: a.cost,
        decision: !d.allowed ? 'rejected' : delayMs > 0 ? 'delayed' : 'admitted',
        delayMs,
        departure: d.allowed ? a.t + delayMs : null,
        rules: d.allowed ? [...heldBy, ...d.rules.filter((r) => r.delayMs > 0).map((r) => r.name)] : d.rejectedBy,
        retryAfterMs: d.retryAfterMs,
      };
    }
    if (instanceOf !== undefined) (records[i] as RequestRecord).instance = instance;
    done++;
    if (options.onProgress && done % every === 0) options.onProgress(done, arrivals.length);
  }

  const waiting = new Waiting();
  try {
    let next = 0;
    while (next < arrivals.length || waiting.size > 0) {
      const a = arrivals[next];
      const held = waiting.peek();
      if (held !== undefined && (a === undefined || held.at <= a.t)) {
        waiting.pop();
        clock.set(held.at);
        await decide(held.i, held.delay);
        continue;
      }
      const i = next++;
      clock.set((a as Arrival).t);
      const counting = throttles[instanceOf === undefined ? 0 : (instanceOf[i] as number)];
      const delay = counting ? ((await counting.hit(a as Arrival))?.delayMs ?? 0) : 0;
      if (delay > 0 && limiter) waiting.push({ at: (a as Arrival).t + delay, i, delay });
      else await decide(i, delay);
    }
  } finally {
    await own?.close();
  }
  options.onProgress?.(arrivals.length, arrivals.length);
  return { policy: policy.name, records, summary: summarize(records, intervalMs) };
}
