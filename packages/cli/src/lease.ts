/**
 * `tollgate compare --lease`: exact decisions against leased ones (docs/distributed.md,
 * "Leases") on the same arrivals, spread over simulated instances.
 *
 * Leases are decided in Redis (the lease call is a Lua function), so the run uses a real
 * Redis (`--redis`) and the real `RedisStore`, on the simulator's clock (supplied time):
 * one store without a lease decides every arrival exactly, then one store per instance,
 * each with `lease`, decides each arrival at the instance a random draw sends it to. Nothing
 * is re-implemented. Every run writes under its own prefix; the keys expire on their own.
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '@tollgate/core';
import { type Arrival, instancesOf } from './arrivals.js';
import { cliError, show } from './errors.js';
import type { Policy } from './policy.js';
import { openRedis } from './redis-client.js';
import { type SimulateOptions, type SimulationResult, simulate } from './simulate.js';
import { type Busiest, busiest } from './stats.js';
import { parseTime } from './time.js';

/** The lease simulated: `RedisStore`'s `lease` option, and how many instances share each key. */
export interface LeasePlan {
  max: number;
  ttlMs: number;
  instances: number;
}

/** Most instances a run simulates. */
export const MAX_INSTANCES = 1000;

/** Deadline of each Redis call: a simulation waits rather than let the failure policy answer. */
const TIMEOUT_MS = 10_000;

/**
 * Parses `--lease max=20,ttl=1s` and `--instances 4`.
 * @throws CliError TG_CLI_INVALID_ARGUMENT
 */
export function parseLease(text: string, instancesText: string | undefined): LeasePlan {
  const bad = (received: string): never => {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--lease',
      expected: 'max=N,ttl=D: the most units one lease takes and how long it may be used, e.g. max=20,ttl=1s',
      received,
      fix: "Pass both, as RedisStore's lease option would have them: --lease max=100,ttl=1s.",
    });
  };
  const parts = new Map<string, string>();
  for (const part of text.split(',')) {
    const [name, value, extra] = part.trim().split('=');
    if ((name !== 'max' && name !== 'ttl') || value === undefined || value === '' || extra !== undefined) bad(show(part.trim()));
    if (parts.has(name as string)) bad(`${name} twice`);
    parts.set(name as string, value as string);
  }
  const maxText = parts.get('max') ?? bad(`${show(text)} without max`);
  const ttlText = parts.get('ttl') ?? bad(`${show(text)} without ttl`);
  const max = Number(maxText);
  if (!/^\d+$/.test(maxText) || !Number.isSafeInteger(max) || max < 1) bad(`max=${maxText}`);
  const ttlMs = parseTime(ttlText, '--lease ttl', 1);
  const instances = instancesText === undefined ? 1 : Number(instancesText);
  if (instancesText !== undefined && (!/^\d+$/.test(instancesText) || instances < 1 || instances > MAX_INSTANCES)) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--instances',
      expected: `a whole number of instances from 1 to ${MAX_INSTANCES}`,
      received: show(instancesText),
      fix: 'Pass how many instances of the application share the limits, e.g. --instances 4.',
    });
  }
  return { max, ttlMs, instances };
}

/** One policy's two runs: every arrival decided exactly, and by instances holding leases. */
export interface LeaseComparison {
  exact: SimulationResult;
  leased: SimulationResult;
  /** The interval less `ttl` (at least 1 ms): a sliding log's guarantee under leases. */
  shortenedMs: number;
  /** The most each run admitted in any interval of `shortenedMs`. */
  shortened: { exact: Busiest; leased: Busiest };
}

type RedisStoreClass = typeof import('@tollgate/redis').RedisStore;

/**
 * Runs every policy exactly and leased on a real Redis (`url`).
 * @throws CliError TG_CLI_REDIS_FAILED when Redis cannot be reached or fails a call
 */
export async function compareLeased(
  policies: readonly Policy[],
  arrivals: readonly Arrival[],
  plan: LeasePlan,
  url: string,
  options: Pick<SimulateOptions, 'intervalMs' | 'onProgress' | 'progressEvery'> & { intervalMs: number },
): Promise<LeaseComparison[]> {
  // Loaded here: compare without --lease never needs Redis.
  const { RedisStore } = await import('@tollgate/redis');
  const redis = await openRedis({ urls: [url], cluster: false, timeoutMs: TIMEOUT_MS }, 'tollgate compare --lease');
  try {
    try {
      await redis.connect();
    } catch (err) {
      throw redisFailed(err);
    }
    const run = `tgsim:${randomUUID().slice(0, 8)}:`;
    const instanceOf = instancesOf(arrivals.length, plan.instances);
    const out: LeaseComparison[] = [];
    const total = policies.length * 2;
    for (const [k, policy] of policies.entries()) {
      const progress = (part: number) => (done: number) =>
        options.onProgress?.((2 * k + part) * arrivals.length + done, total * arrivals.length);
      const exact = await onStores(RedisStore, redis.client, 1, `${run}${k}e:`, undefined, (stores) =>
        simulate(policy, arrivals, { ...options, onProgress: progress(0), stores }),
      );
      const leased = await onStores(RedisStore, redis.client, plan.instances, `${run}${k}l:`, plan, (stores) =>
        simulate(policy, arrivals, { ...options, onProgress: progress(1), stores, instanceOf }),
      );
      const shortenedMs = Math.max(1, options.intervalMs - plan.ttlMs);
      out.push({
        exact,
        leased,
        shortenedMs,
        shortened: { exact: busiest(exact.records, shortenedMs), leased: busiest(leased.records, shortenedMs) },
      });
    }
    return out;
  } finally {
    redis.close();
  }
}

/**
 * Runs `f` on `n` RedisStores (with `lease` when `plan` is given) under `prefix`, closes them
 * (leases give their units back), and fails loudly if any Redis call failed: the failure
 * policy's answers would pass for decisions.
 */
async function onStores(
  RedisStore: RedisStoreClass,
  client: object,
  n: number,
  prefix: string,
  plan: LeasePlan | undefined,
  f: (stores: Store[]) => Promise<SimulationResult>,
): Promise<SimulationResult> {
  let failure: unknown;
  const stores = Array.from({ length: n }, () => {
    const store = new RedisStore({
      client: client as never,
      prefix,
      timeoutMs: TIMEOUT_MS,
      onStoreError: 'deny',
      instances: n,
      ...(plan ? { lease: { max: plan.max, ttl: plan.ttlMs } } : {}),
    });
    store.on('error', (e: { error: unknown }) => {
      failure ??= e.error;
    });
    return store;
  });
  let result: SimulationResult;
  try {
    result = await f(stores);
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
  if (failure !== undefined) throw redisFailed(failure);
  return result;
}

function redisFailed(err: unknown) {
  return cliError(
    'TG_CLI_REDIS_FAILED',
    {
      path: '--redis',
      expected: 'a reachable Redis that runs every decision',
      received: (err as Error)?.message ?? show(err),
      fix: 'Check the URL, the network and the credentials, and that the user may load and call functions (FUNCTION LOAD, FCALL) or scripts.',
    },
    err,
  );
}
