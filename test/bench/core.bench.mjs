// In-process benchmark of @tollgate/core (docs/benchmarks.md, "In-process"): decisions per
// second through the public promise API (`await limiter.consume(req)`) for each algorithm on
// one key and across 100k keys, a four-rule stack beside one rule, and
// rate-limiter-flexible's RateLimiterMemory.consume in the same run for a ratio; then heap,
// external (typed-array) and RSS bytes per key in MemoryStore for each algorithm at 1M keys.
//
//   pnpm build && node test/bench/core.bench.mjs [--time 1000] [--runs 3] [--keys 1000000]
//
// It imports the BUILT package (packages/core/dist/index.mjs), as users do. Every measurement runs
// in a fresh child process (started with --expose-gc), so one algorithm's JIT feedback or
// garbage never colours another's figures; runs are interleaved and each figure is the
// median of --runs children with its spread.
import { parseArgs } from 'node:util';
import { isMain, median, pm, runChild } from './util.mjs';

const MANY = 100_000;
const RLF = 'rate-limiter-flexible';
const CORE = new URL('../../packages/core/dist/index.mjs', import.meta.url).href;

// One rule per algorithm, the same budget for all: 1e9 units per second, big enough that a
// single hot key is (mostly) admitted, so the figures are for the admit path, which writes.
const LIMIT = 1_000_000_000;
export const ALGORITHMS = {
  'fixed-window': { algorithm: 'fixed-window' },
  'sliding-log': { algorithm: 'sliding-log' },
  'sliding-window': { algorithm: 'sliding-window' },
  'token-bucket': { algorithm: 'token-bucket' },
  'leaky-bucket meter': { algorithm: 'leaky-bucket' },
  'leaky-bucket queue': { algorithm: 'leaky-bucket', mode: 'queue' },
};
/** Four rules on the same request (key, tenant, global, endpoint), as the HTTP stack. */
const STACK4 = 'fixed-window, 4-rule stack';

/** IPv4-looking keys, distinct for i < 2^24. */
const keyOf = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

function rulesFor(label, limit, window) {
  if (label === STACK4) {
    return [
      { name: 'ip', key: (req) => req.k, limit, window, algorithm: 'fixed-window' },
      { name: 'tenant', key: () => 'tenant', limit: limit * 1000, window, algorithm: 'fixed-window' },
      { name: 'global', key: () => 'all', limit: limit * 1000, window, algorithm: 'fixed-window' },
      { name: 'endpoint', key: () => 'GET /', limit: limit * 1000, window, algorithm: 'fixed-window' },
    ];
  }
  return [{ name: 'r', key: (req) => req.k, limit, window, ...ALGORITHMS[label] }];
}

/**
 * Runs `batch(from, n)` (n awaited calls, numbered from `from`) in batches of 10 000 until
 * `time` ms have passed, after a 300 ms warm-up. Returns calls per second overall, and in
 * the fastest batch: on a machine shared with other work the fastest batch is the one
 * least disturbed by it, the closest estimate of what the code does on an idle core.
 * Clock readings around a batch (rather than around every call, as tinybench does) keep
 * the harness's own cost out of a figure of about 100 ns per call.
 */
async function timed(batch, time) {
  const BATCH = 10_000;
  let i = 0;
  for (const until = performance.now() + 300; performance.now() < until; i += BATCH) await batch(i, BATCH);
  let n = 0;
  let fastest = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < time) {
    await batch(i, BATCH);
    i += BATCH;
    n += BATCH;
    const t1 = performance.now();
    fastest = Math.max(fastest, (BATCH / (t1 - t)) * 1000);
    t = t1;
  }
  return { perSec: (n / (t - t0)) * 1000, fastest };
}

/** Decisions/s on one key and on 100k keys for one label. */
async function throughputChild(label, time) {
  const keys = Array.from({ length: MANY }, (_, i) => keyOf(i));
  const reqs = keys.map((k) => ({ k }));
  const out = {};
  for (const spread of ['1 key', '100k keys']) {
    const count = { yes: 0, all: 0 };
    const one = spread === '1 key';
    let speed;
    if (label === RLF) {
      const { RateLimiterMemory } = await import('rate-limiter-flexible');
      const rlf = new RateLimiterMemory({ points: LIMIT, duration: 1 });
      speed = await timed(async (from, n) => {
        for (let i = from; i < from + n; i++) {
          count.all++;
          try {
            await rlf.consume(one ? keys[0] : keys[i % MANY], 1);
            count.yes++;
          } catch {
            // over the limit: RateLimiterMemory rejects with a RateLimiterRes
          }
        }
      }, time);
    } else {
      const { createLimiter, MemoryStore } = await import(CORE);
      const store = new MemoryStore({ sweepIntervalMs: 0 });
      const limiter = createLimiter({ rules: rulesFor(label, LIMIT, '1s'), store });
      speed = await timed(async (from, n) => {
        for (let i = from; i < from + n; i++) {
          const d = await limiter.consume(one ? reqs[0] : reqs[i % MANY]);
          count.all++;
          if (d.allowed) count.yes++;
        }
      }, time);
      await store.close();
    }
    out[spread] = { ...speed, admitted: count.yes / Math.max(1, count.all) };
  }
  return out;
}

/** Heap (+ typed-array) and RSS bytes per key with `keys` states of one rule in a MemoryStore. */
async function memoryChild(label, keys) {
  const { createLimiter, MemoryStore } = await import(CORE);
  const store = new MemoryStore({ sweepIntervalMs: 0, maxKeys: keys + 1 });
  const limiter = createLimiter({ rules: rulesFor(label, 100, '1h'), store });
  const req = { k: '' };
  const used = () => {
    globalThis.gc();
    globalThis.gc();
    const m = process.memoryUsage();
    return { heap: m.heapUsed + m.external, rss: m.rss };
  };
  const before = used();
  for (let i = 0; i < keys; i++) {
    // Built here, so the store holds the only reference to each key string.
    req.k = keyOf(i);
    await limiter.consume(req);
  }
  const after = used();
  if (store.size !== keys) throw new Error(`expected ${keys} states, found ${store.size}`);
  await store.close();
  return { heap: (after.heap - before.heap) / keys, rss: (after.rss - before.rss) / keys };
}

const child = (args) => runChild(import.meta.url, args);

const LABELS = [...Object.keys(ALGORITHMS), STACK4, RLF];

/** Decisions/s per label and spread; runs interleaved. Returns rows. */
export async function runInProcess({ time = 1000, runs = 3, log = (s) => process.stderr.write(`${s}\n`) } = {}) {
  const results = {};
  for (let run = 0; run < runs; run++) {
    for (const label of LABELS) {
      const r = await child(['--child', label, '--time', String(time)]);
      for (const [spread, v] of Object.entries(r)) {
        results[`${label}|${spread}`] ??= { label, spread, perSec: [], fastest: [], admitted: [] };
        const slot = results[`${label}|${spread}`];
        slot.perSec.push(v.perSec);
        slot.fastest.push(v.fastest);
        slot.admitted.push(v.admitted);
      }
      log(
        `  in-process ${run + 1}/${runs} ${label}: ${Object.entries(r)
          .map(([s, v]) => `${s} ${(v.perSec / 1e6).toFixed(2)} M/s`)
          .join(', ')}`,
      );
    }
  }
  return Object.values(results).map((v) => ({
    label: v.label,
    spread: v.spread,
    perSec: median(v.perSec),
    pm: pm(v.perSec),
    fastest: median(v.fastest),
    fastestPm: pm(v.fastest),
    vsRlf: median(v.perSec) / median(results[`${RLF}|${v.spread}`].perSec),
    fastestVsRlf: median(v.fastest) / median(results[`${RLF}|${v.spread}`].fastest),
    admitted: median(v.admitted),
  }));
}

/** Bytes per key at `keys` keys per algorithm (fresh process each, `runs` of each). */
export async function runMemory({ keys = 1_000_000, runs = 3, log = (s) => process.stderr.write(`${s}\n`) } = {}) {
  const results = {};
  for (let run = 0; run < runs; run++) {
    for (const label of Object.keys(ALGORITHMS)) {
      const r = await child(['--child', label, '--memory', '--keys', String(keys)]);
      results[label] ??= { heap: [], rss: [] };
      const slot = results[label];
      slot.heap.push(r.heap);
      slot.rss.push(r.rss);
      log(`  memory ${run + 1}/${runs} ${label}: ${r.heap.toFixed(1)} heap B/key, ${r.rss.toFixed(1)} RSS B/key`);
    }
  }
  return Object.entries(results).map(([label, v]) => ({
    label,
    heap: median(v.heap),
    heapPm: pm(v.heap),
    rss: median(v.rss),
    rssPm: pm(v.rss),
  }));
}

const M = (x) => `${(x / 1e6).toFixed(2)} M/s`;

export function inProcessTable(rows) {
  const out = [
    '| algorithm | keys | decisions/s overall | spread | vs rate-limiter-flexible | decisions/s, fastest batch | spread | vs rate-limiter-flexible | admitted |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.label} | ${r.spread} | ${M(r.perSec)} | ${r.pm} | ${r.vsRlf.toFixed(2)}× | ${M(r.fastest)} | ${r.fastestPm} | ${r.fastestVsRlf.toFixed(2)}× | ${Math.round(r.admitted * 100)}% |`,
    );
  }
  return out.join('\n');
}

export function memoryTable(rows, keys) {
  const out = [
    `| algorithm | heap + typed-array bytes/key at ${keys.toLocaleString('en')} keys | spread | RSS bytes/key | spread |`,
    '| --- | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) out.push(`| ${r.label} | ${r.heap.toFixed(1)} | ${r.heapPm} | ${r.rss.toFixed(1)} | ${r.rssPm} |`);
  return out.join('\n');
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      time: { type: 'string', default: '1000' },
      runs: { type: 'string', default: '3' },
      keys: { type: 'string', default: '1000000' },
      child: { type: 'string' },
      memory: { type: 'boolean', default: false },
    },
  });
  if (values.child !== undefined) {
    const out = values.memory
      ? await memoryChild(values.child, Number(values.keys))
      : await throughputChild(values.child, Number(values.time));
    process.stdout.write(`${JSON.stringify(out)}\n`);
    process.exit(0);
  }
  console.log(inProcessTable(await runInProcess({ time: Number(values.time), runs: Number(values.runs) })));
  console.log(memoryTable(await runMemory({ keys: Number(values.keys), runs: Number(values.runs) }), Number(values.keys)));
}
