// The error of leased decisions against exact ones on realistic traces (docs/distributed.md,
// "Leases"): N simulated instances share one real Redis, each its own RedisStore with
// `lease`, and one RedisStore without a lease decides the same trace exactly. Arrivals are
// Poisson (a steady rate around the limit) or bursts (quiet, then a burst far above it),
// each request at a random instance; time is supplied (a clock stepped through the trace),
// so a run is deterministic and fast. Reported per algorithm: units admitted by both, the
// difference, and the most admitted in any window W (and in W - ttl) against L.
//
//   pnpm --filter @tollgate/core --filter @tollgate/redis build
//   node test/bench/lease-error.mjs [--instances 4] [--seconds 120]
import { parseArgs } from 'node:util';
import { startRedis } from './util.mjs';

const { createLimiter, ManualClock } = await import(new URL('../../packages/core/dist/index.mjs', import.meta.url).href);
const { RedisStore } = await import(new URL('../../packages/redis/dist/index.mjs', import.meta.url).href);

const { values } = parseArgs({
  options: { instances: { type: 'string', default: '4' }, seconds: { type: 'string', default: '120' } },
});
const N = Number(values.instances);
const SECONDS = Number(values.seconds);
const L = 100;
const W = 10_000;
const LEASE = { max: 20, ttl: 1000 };
const ALGORITHMS = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket', 'sliding-buckets'];

function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** [time ms, instance] of each request. */
function poisson(perSecond, seed) {
  const rnd = prng(seed);
  const out = [];
  for (let t = 0; t < SECONDS * 1000; t += -Math.log(1 - rnd()) * (1000 / perSecond)) out.push([Math.floor(t), Math.floor(rnd() * N)]);
  return out;
}

/** Quiet (2/s) for 20 s, then 2 s at 200/s, over and over. */
function bursts(seed) {
  const rnd = prng(seed);
  const out = [];
  let t = 0;
  while (t < SECONDS * 1000) {
    const inBurst = t % 22_000 >= 20_000;
    t += -Math.log(1 - rnd()) * (1000 / (inBurst ? 200 : 2));
    out.push([Math.floor(t), Math.floor(rnd() * N)]);
  }
  return out;
}

/** The most units admitted in any interval of `span` ms (half-open). */
function most(times, span) {
  let from = 0;
  let best = 0;
  for (let j = 0; j < times.length; j++) {
    while (times[from] <= times[j] - span) from++;
    best = Math.max(best, j - from + 1);
  }
  return best;
}

const redis = await startRedis();
let run = 0;
async function admittedTimes(algorithm, trace, leased) {
  const prefix = `e${++run}:`;
  const clock = new ManualClock(1_700_000_000_000);
  const start = clock.now();
  const clients = [];
  const stores = [];
  for (let i = 0; i < (leased ? N : 1); i++) {
    const client = redis.client();
    clients.push(client);
    stores.push(new RedisStore({ client, prefix, timeoutMs: 5000, instances: N, ...(leased ? { lease: LEASE } : {}) }));
  }
  const limiters = stores.map((store) =>
    createLimiter({ rules: [{ name: 'r', algorithm, limit: L, window: W, key: () => 'k' }], store, clock }),
  );
  const times = [];
  for (const [t, inst] of trace) {
    clock.set(start + t);
    const d = await limiters[leased ? inst : 0].consume({});
    if (d.allowed) times.push(t);
  }
  for (const s of stores) await s.close();
  for (const c of clients) c.disconnect();
  return times;
}

console.log(`${N} instances, L = ${L} per ${W / 1000} s, lease { max: ${LEASE.max}, ttl: ${LEASE.ttl} ms }, ${SECONDS} s of arrivals`);
console.log('| trace | algorithm | exact admitted | leased admitted | difference | most in W (exact / leased) | most in W - ttl, leased |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
const traces = {
  'Poisson 10/s (the limit)': poisson(10, 1),
  'Poisson 30/s (3× the limit)': poisson(30, 2),
  'bursts (2/s, then 200/s for 2 s)': bursts(3),
};
try {
  for (const [name, trace] of Object.entries(traces)) {
    for (const algorithm of ALGORITHMS) {
      const exact = await admittedTimes(algorithm, trace, false);
      const leased = await admittedTimes(algorithm, trace, true);
      const diff = leased.length - exact.length;
      console.log(
        `| ${name} | ${algorithm} | ${exact.length} | ${leased.length} | ${diff >= 0 ? '+' : ''}${diff} (${((diff / exact.length) * 100).toFixed(2)} %) | ${most(exact, W)} / ${most(leased, W)} | ${most(leased, W - LEASE.ttl)} |`,
      );
    }
  }
} finally {
  await redis.stop();
}
