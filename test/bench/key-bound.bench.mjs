// MemoryStore at its bound (docs/benchmarks-history.md, "MemoryStore at maxKeys"): heap (+ typed
// array) bytes per key with 1 000 000 keys held, and decisions per second once the store is
// full, for a flood of new keys (every decision evicts one state) and for keys in the store,
// with 0% or 10% of the held keys refused (which eviction must keep). Decisions per second
// are per second of the child's CPU time, which other load on the machine moves less.
//
//   pnpm --filter @tollgate/core build && node test/bench/key-bound.bench.mjs [--keys 1000000] [--runs 3] [--time 1000]
//
// It imports the BUILT core (packages/core/dist/index.mjs). Each figure comes from a fresh child
// started with --expose-gc; the figure is the median of --runs children.
import { parseArgs } from 'node:util';
import { isMain, median, pm, runChild } from './util.mjs';

// TOLLGATE_CORE=/path/to/dist/index.mjs measures another build (an A/B against main's).
const CORE = process.env.TOLLGATE_CORE
  ? new URL(`file://${process.env.TOLLGATE_CORE}`).href
  : new URL('../../packages/core/dist/index.mjs', import.meta.url).href;
const LABELS = ['fixed-window', 'sliding-window'];
const keyOf = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

/**
 * Decisions in batches of 10 000 for `time` ms after a 200 ms warm-up. Returns decisions
 * per second of the child's own CPU time (user + system): on a machine shared with other
 * work, wall time mostly measures the others.
 */
async function timed(decide, time) {
  const BATCH = 10_000;
  let i = 0;
  for (const until = performance.now() + 200; performance.now() < until; i += BATCH) for (let j = 0; j < BATCH; j++) await decide(i + j);
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < time) {
    for (let j = 0; j < BATCH; j++) await decide(i + j);
    i += BATCH;
    n += BATCH;
  }
  const c = process.cpuUsage(c0);
  return n / ((c.user + c.system) / 1e6);
}

async function childRun(algorithm, keys, time, refusedShare) {
  const { createLimiter, MemoryStore } = await import(CORE);
  const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: keys });
  // Limit 2 per hour: a key asked three times is refused (held) for the rest of the run.
  const limiter = createLimiter({ rules: [{ name: 'r', key: (req) => req.k, algorithm, limit: 2, window: '1h' }], store });
  const req = { k: '' };
  const used = () => {
    globalThis.gc();
    globalThis.gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  const before = used();
  const refusedEvery = refusedShare > 0 ? Math.round(1 / refusedShare) : 0;
  for (let i = 0; i < keys; i++) {
    req.k = keyOf(i);
    await limiter.consume(req);
    if (refusedEvery > 0 && i % refusedEvery === 0) {
      await limiter.consume(req);
      await limiter.consume(req);
    }
  }
  const heap = (used() - before) / keys;
  if (store.size !== keys) throw new Error(`expected ${keys} states, found ${store.size}`);
  // Keys never seen: each decision adds a state and evicts one.
  const newReq = { k: '' };
  const flood = await timed((i) => {
    newReq.k = `f${i}`;
    return limiter.consume(newReq);
  }, time);
  const heldReq = { k: '' };
  const held = await timed((i) => {
    heldReq.k = keyOf((i * 7919) % keys);
    return limiter.consume(heldReq);
  }, time);
  await store.close();
  return { heap, flood, held };
}

const child = (args) => runChild(import.meta.url, args);

if (isMain(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      keys: { type: 'string', default: '1000000' },
      runs: { type: 'string', default: '3' },
      time: { type: 'string', default: '1000' },
      child: { type: 'string' },
      refused: { type: 'string', default: '0' },
    },
  });
  if (values.child !== undefined) {
    const out = await childRun(values.child, Number(values.keys), Number(values.time), Number(values.refused));
    process.stdout.write(`${JSON.stringify(out)}\n`);
    process.exit(0);
  }
  const rows = [];
  for (const label of LABELS) {
    for (const refused of ['0', '0.1']) {
      const r = { heap: [], flood: [], held: [] };
      for (let run = 0; run < Number(values.runs); run++) {
        const o = await child(['--child', label, '--keys', values.keys, '--time', values.time, '--refused', refused]);
        for (const k of Object.keys(r)) r[k].push(o[k]);
        process.stderr.write(`  ${label} refused ${refused} run ${run + 1}: ${JSON.stringify(o)}\n`);
      }
      rows.push({ label, refused, ...Object.fromEntries(Object.entries(r).map(([k, v]) => [k, [median(v), pm(v)]])) });
    }
  }
  const M = ([x, s]) => `${(x / 1e6).toFixed(2)} M/s ${s}`;
  console.log(
    `| algorithm | held keys refused | heap + typed-array bytes/key at ${Number(values.keys).toLocaleString('en')} keys | decisions per CPU-second, new keys (each evicts) | decisions per CPU-second, keys in the store |`,
  );
  console.log('| --- | ---: | ---: | ---: | ---: |');
  for (const r of rows)
    console.log(`| ${r.label} | ${Number(r.refused) * 100}% | ${r.heap[0].toFixed(1)} ${r.heap[1]} | ${M(r.flood)} | ${M(r.held)} |`);
}
