// In-process benchmark of @tollgate/core (issue 2): decisions per second through the public
// promise API (`limiter.consume`) for each algorithm on one key and across 100k keys, with
// rate-limiter-flexible's RateLimiterMemory.consume in the same run for a ratio; then heap
// bytes per key in MemoryStore for each algorithm at 1M keys.
//
//   pnpm build && node test/bench/core.bench.mjs [--time 1000] [--runs 3] [--keys 1000000]
//
// It imports the BUILT package (packages/core/dist/esm), as users do. Every measurement runs
// in a fresh child process (started with --expose-gc), so one algorithm's JIT feedback or
// garbage never colours another's figures; throughput is the median of --runs children.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    time: { type: 'string', default: '1000' },
    runs: { type: 'string', default: '3' },
    keys: { type: 'string', default: '1000000' },
    child: { type: 'string' },
    heap: { type: 'boolean', default: false },
  },
});
const TIME = Number(values.time);
const RUNS = Number(values.runs);
const HEAP_KEYS = Number(values.keys);
const MANY = 100_000;
const RLF = 'rate-limiter-flexible';

// One rule per algorithm, the same budget for all: 1M units per second, big enough that a
// single hot key is (mostly) admitted, so the figures are for the admit path, which writes.
const LIMIT = 1_000_000;
const ALGORITHMS = {
  'fixed-window': { algorithm: 'fixed-window' },
  'sliding-log': { algorithm: 'sliding-log' },
  'sliding-window': { algorithm: 'sliding-window' },
  'token-bucket': { algorithm: 'token-bucket' },
  'leaky-bucket meter': { algorithm: 'leaky-bucket' },
  'leaky-bucket queue': { algorithm: 'leaky-bucket', mode: 'queue' },
};

/** IPv4-looking keys, distinct for i < 2^24. */
const keyOf = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

if (values.child !== undefined) {
  const out = values.heap ? await heapChild(values.child) : await throughputChild(values.child);
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}

/** Decisions/s on one key and on 100k keys for one algorithm (or rate-limiter-flexible). */
async function throughputChild(label) {
  const { Bench } = await import('tinybench');
  const keys = Array.from({ length: MANY }, (_, i) => keyOf(i));
  const reqs = keys.map((k) => ({ k }));
  const bench = new Bench({ time: TIME, warmupTime: 300 });
  const counts = {};
  const closers = [];
  for (const spread of ['1 key', '100k keys']) {
    const count = { yes: 0, all: 0 };
    counts[spread] = count;
    let i = 0;
    if (label === RLF) {
      const { RateLimiterMemory } = await import('rate-limiter-flexible');
      const rlf = new RateLimiterMemory({ points: LIMIT, duration: 1 });
      bench.add(spread, async () => {
        const key = spread === '1 key' ? keys[0] : keys[i++ % MANY];
        count.all++;
        try {
          await rlf.consume(key, 1);
          count.yes++;
        } catch {
          // over the limit: RateLimiterMemory rejects with a RateLimiterRes
        }
      });
    } else {
      const { createLimiter, MemoryStore } = await import('../../packages/core/dist/esm/index.js');
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      closers.push(() => store.close());
      const limiter = createLimiter({
        rules: [{ name: 'r', key: (req) => req.k, limit: LIMIT, window: '1s', ...ALGORITHMS[label] }],
        store,
      });
      bench.add(spread, async () => {
        const d = await limiter.consume(spread === '1 key' ? reqs[0] : reqs[i++ % MANY]);
        count.all++;
        if (d.allowed) count.yes++;
      });
    }
  }
  await bench.run();
  for (const close of closers) await close();
  return Object.fromEntries(
    bench.tasks.map((t) => [t.name, { perSec: 1000 / t.result.period, admitted: counts[t.name].yes / Math.max(1, counts[t.name].all) }]),
  );
}

/** Heap bytes per key with HEAP_KEYS states of one rule in a MemoryStore. */
async function heapChild(label) {
  const { createLimiter, MemoryStore } = await import('../../packages/core/dist/esm/index.js');
  const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: HEAP_KEYS + 1 });
  const limiter = createLimiter({ rules: [{ name: 'r', key: (req) => req.k, limit: 100, window: '1h', ...ALGORITHMS[label] }], store });
  const req = { k: '' };
  globalThis.gc();
  globalThis.gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < HEAP_KEYS; i++) {
    // Built here, so the store holds the only reference to each key string.
    req.k = keyOf(i);
    await limiter.consume(req);
  }
  globalThis.gc();
  globalThis.gc();
  const after = process.memoryUsage().heapUsed;
  if (store.size !== HEAP_KEYS) throw new Error(`expected ${HEAP_KEYS} states, found ${store.size}`);
  await store.close();
  return { bytesPerKey: (after - before) / HEAP_KEYS };
}

function child(label, heap) {
  const args = ['--expose-gc', fileURLToPath(import.meta.url), '--child', label, '--time', String(TIME), '--keys', String(HEAP_KEYS)];
  if (heap) args.push('--heap');
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`${label}: child exited with ${r.status}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

const labels = [...Object.keys(ALGORITHMS), RLF];
const results = {};
for (let run = 0; run < RUNS; run++) {
  // Interleave the runs, so a noisy moment on the machine does not hit one label only.
  for (const label of labels) {
    const r = child(label, false);
    for (const [spread, v] of Object.entries(r)) {
      const name = `${label} · ${spread}`;
      results[name] ??= { perSec: [], admitted: [] };
      const slot = results[name];
      slot.perSec.push(v.perSec);
      slot.admitted.push(v.admitted);
    }
  }
}

console.log(
  `Decisions per second through limiter.consume — median of ${RUNS} fresh processes, tinybench ${TIME} ms per task, Node ${process.version}`,
);
const rows = Object.entries(results).map(([task, v]) => {
  const spread = task.split(' · ')[1];
  const ref = median(results[`${RLF} · ${spread}`].perSec);
  return {
    task,
    'decisions/s': Math.round(median(v.perSec)),
    'min–max': `${Math.round(Math.min(...v.perSec) / 1000)}k–${Math.round(Math.max(...v.perSec) / 1000)}k`,
    admitted: `${Math.round(100 * median(v.admitted))}%`,
    'vs RLF': `${(median(v.perSec) / ref).toFixed(2)}×`,
  };
});
console.table(rows);

console.log(`Heap bytes per key in MemoryStore (${HEAP_KEYS.toLocaleString('en')} keys of one rule, key strings included)`);
console.table(Object.keys(ALGORITHMS).map((label) => ({ algorithm: label, 'bytes/key': Math.round(child(label, true).bytesPerKey) })));
