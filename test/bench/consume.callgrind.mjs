// Instructions per `await limiter.consume(req)` in process (docs/benchmarks.md, "In-process
// instructions"), counted by valgrind's callgrind: MemoryStore, one key, for one rule of
// each window algorithm, a rule with no key for the request (what every decision costs),
// the four-rule stack of core.bench.mjs (client, tenant, global, endpoint), that stack for
// an anonymous client, and rate-limiter-flexible's RateLimiterMemory.consume, on one client key and
// going round 10 000 of them. Instruction counts do
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
import { callgrindArgs } from './util.mjs';

// TOLLGATE_CORE: another build's entry point (e.g. a copy of main's, for a before/after).
const CORE = process.env.TOLLGATE_CORE
  ? pathToFileURL(process.env.TOLLGATE_CORE).href
  : new URL('../../packages/core/dist/index.mjs', import.meta.url).href;
const LIMIT = 1_000_000_000;
// An hour, not a minute: a run under valgrind takes a minute or more, and the first
// decision in a new window takes branches the JIT has not seen (a deoptimisation and a
// recompilation, tens of millions of instructions) in one of a variant's two runs and not
// the other. With an hour that happens in about one run in forty.
const WINDOW = '1h';
const FW = { limit: LIMIT, window: WINDOW, algorithm: 'fixed-window' };

const rlf = async () => {
  const { RateLimiterMemory } = await import('rate-limiter-flexible');
  const rl = new RateLimiterMemory({ points: LIMIT, duration: 3600 });
  return (req) => rl.consume(req.k);
};
const stack = (first = (req) => req.k) =>
  one(
    { name: 'ip', key: first, ...FW },
    { name: 'tenant', key: () => 'tenant', ...FW },
    { name: 'global', key: () => 'all', ...FW },
    { name: 'endpoint', key: () => 'GET /', ...FW },
  );

/**
 * The limiters measured, by name: a function that returns `consume(req)` as a promise, and
 * how many client keys the calls go round (one, or 10 000: every call then asks for
 * another client than the last, as on a server with many clients; each key is decided
 * once before the warm-up, so the measured calls find states that exist).
 */
const VARIANTS = {
  'fixed-window, one rule': [async () => one({ name: 'ip', key: (req) => req.k, ...FW }), 1],
  'sliding-window, one rule': [async () => one({ name: 'ip', key: (req) => req.k, limit: LIMIT, window: WINDOW }), 1],
  'token-bucket, one rule': [
    async () => one({ name: 'ip', key: (req) => req.k, limit: LIMIT, window: WINDOW, algorithm: 'token-bucket' }),
    1,
  ],
  // What every decision costs whatever its rules: the one rule's key is absent, so no op.
  'one rule, key absent (no op)': [async () => one({ name: 'ip', key: () => undefined, ...FW }), 1],
  'fixed-window, 4-rule stack': [stack, 1],
  // An anonymous client: the first rule's key (a user id) is absent, the other three apply.
  'fixed-window, 4-rule stack, first key absent': [() => stack(() => undefined), 1],
  'rate-limiter-flexible RateLimiterMemory.consume': [rlf, 1],
  'fixed-window, one rule, 10k clients': [async () => one({ name: 'ip', key: (req) => req.k, ...FW }), 10_000],
  'fixed-window, 4-rule stack, 10k clients': [stack, 10_000],
  'rate-limiter-flexible RateLimiterMemory.consume, 10k clients': [rlf, 10_000],
};

async function one(...rules) {
  const { createLimiter } = await import(CORE);
  const limiter = createLimiter({ rules });
  return (req) => limiter.consume(req);
}

/** `n` calls for one key: the warm-up and the measured calls run this same code. */
async function drive1(consume, req, n) {
  for (let i = 0; i < n; i++) await consume(req);
}

/** `n` calls going round `reqs` from `from`; returns where it stopped. */
async function driveN(consume, reqs, from, n) {
  let j = from;
  for (let i = 0; i < n; i++) {
    await consume(reqs[j]);
    if (++j === reqs.length) j = 0;
  }
  return j;
}

async function child(variant, warmup, calls) {
  const [make, keys] = VARIANTS[variant];
  const consume = await make();
  // Full collections on both sides of the measured calls, in both runs of a variant: the
  // difference then holds the collection of exactly those calls' garbage, not a major GC
  // that one run happened to start and the other did not.
  if (keys === 1) {
    const req = { k: '10.0.0.1' };
    await drive1(consume, req, warmup);
    globalThis.gc?.();
    await drive1(consume, req, calls);
    globalThis.gc?.();
    return;
  }
  const reqs = Array.from({ length: keys }, (_, i) => ({ k: `10.0.${i >> 8}.${i & 255}` }));
  let j = await driveN(consume, reqs, 0, keys + warmup);
  globalThis.gc?.();
  j = await driveN(consume, reqs, j, calls);
  globalThis.gc?.();
}

/** Total instructions of one child run under callgrind. */
function total(variant, warmup, calls) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-callgrind-consume-'));
  const out = join(dir, 'cg.out');
  try {
    execFileSync('valgrind', callgrindArgs(out, fileURLToPath(import.meta.url), variant, warmup, calls), {
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
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
