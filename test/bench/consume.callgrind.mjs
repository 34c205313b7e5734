// Instructions per `await limiter.consume(req)` in process (docs/benchmarks.md, "In-process
// instructions"), counted by valgrind's callgrind: MemoryStore, one key, for one rule of
// each window algorithm, the four-rule stack of core.bench.mjs (client, tenant, global,
// endpoint) and rate-limiter-flexible's RateLimiterMemory.consume. Instruction counts do
// not depend on what else runs on the machine, so this is the figure to compare when
// throughput is noise.
//
//   pnpm build && node test/bench/consume.callgrind.mjs [--calls 40000] [--warmup 40000]
//
// Each variant runs twice under valgrind in its own process (node --single-threaded, so no
// background compiler or GC thread adds work that varies): after `--warmup` calls and a
// full GC, once with no further call and once with `--calls` more (then a full GC again).
// The difference of the two totals divided by `--calls` is the cost of one call, garbage
// collection included; start-up, warm-up and exit cancel out.
// Needs valgrind; about 20 minutes on a loaded 2-core VM (the runs are sequential).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

// TOLLGATE_CORE: another build's entry point (e.g. a copy of main's, for a before/after).
const CORE = process.env.TOLLGATE_CORE
  ? pathToFileURL(process.env.TOLLGATE_CORE).href
  : new URL('../../packages/core/dist/index.mjs', import.meta.url).href;
const LIMIT = 1_000_000_000;
const FW = { limit: LIMIT, window: '1m', algorithm: 'fixed-window' };

/** The limiters measured, by name: a function that returns `consume(req)` as a promise. */
const VARIANTS = {
  'fixed-window, one rule': async () => one({ name: 'ip', key: (req) => req.k, ...FW }),
  'sliding-window, one rule': async () => one({ name: 'ip', key: (req) => req.k, limit: LIMIT, window: '1m' }),
  'token-bucket, one rule': async () => one({ name: 'ip', key: (req) => req.k, limit: LIMIT, window: '1m', algorithm: 'token-bucket' }),
  'fixed-window, 4-rule stack': async () =>
    one(
      { name: 'ip', key: (req) => req.k, ...FW },
      { name: 'tenant', key: () => 'tenant', ...FW },
      { name: 'global', key: () => 'all', ...FW },
      { name: 'endpoint', key: () => 'GET /', ...FW },
    ),
  'rate-limiter-flexible RateLimiterMemory.consume': async () => {
    const { RateLimiterMemory } = await import('rate-limiter-flexible');
    const rl = new RateLimiterMemory({ points: LIMIT, duration: 60 });
    return (req) => rl.consume(req.k);
  },
};

async function one(...rules) {
  const { createLimiter } = await import(CORE);
  const limiter = createLimiter({ rules });
  return (req) => limiter.consume(req);
}

async function child(variant, warmup, calls) {
  const consume = await VARIANTS[variant]();
  const req = { k: '10.0.0.1' };
  for (let i = 0; i < warmup; i++) await consume(req);
  // Full collections on both sides of the measured calls, in both runs of a variant: the
  // difference then holds the collection of exactly those calls' garbage, not a major GC
  // that one run happened to start and the other did not.
  globalThis.gc?.();
  for (let i = 0; i < calls; i++) await consume(req);
  globalThis.gc?.();
}

/** Total instructions of one child run under callgrind. */
function total(variant, warmup, calls) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-callgrind-consume-'));
  const out = join(dir, 'cg.out');
  try {
    execFileSync(
      'valgrind',
      [
        '--tool=callgrind',
        `--callgrind-out-file=${out}`,
        process.execPath,
        '--single-threaded',
        '--expose-gc',
        // Fixed seeds: the string hashes (so every Map's layout) and Math.random are the
        // same in every run. A spread of about ±1 000 per call remains between runs of the
        // same code (docs/benchmarks.md): compare figures well apart from that.
        '--hash-seed=1',
        '--random-seed=1',
        fileURLToPath(import.meta.url),
        '--child',
        variant,
        '--warmup',
        String(warmup),
        '--calls',
        String(calls),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 * 1024 * 1024 },
    );
    const m = /^totals:\s+(\d+)/m.exec(readFileSync(out, 'utf8'));
    if (!m) throw new Error(`no totals in the callgrind output of ${variant}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const { values } = parseArgs({
  options: {
    child: { type: 'string' },
    calls: { type: 'string', default: '40000' },
    warmup: { type: 'string', default: '40000' },
    only: { type: 'string' },
  },
});
const calls = Number(values.calls);
const warmup = Number(values.warmup);
if (values.child !== undefined) await child(values.child, warmup, calls);
else {
  const names = Object.keys(VARIANTS).filter((v) => values.only === undefined || v.includes(values.only));
  console.log(`| variant | instructions per await consume (warm-up ${warmup}, ${calls} calls) |`);
  console.log('| --- | --- |');
  for (const v of names) {
    const base = total(v, warmup, 0);
    const more = total(v, warmup, calls);
    console.log(`| ${v} | ${Math.round((more - base) / calls)} |`);
  }
}
