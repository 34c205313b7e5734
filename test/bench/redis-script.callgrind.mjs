// Instructions redis-server executes per decision (docs/benchmarks.md, "Redis per decision"),
// counted by valgrind's callgrind inside redis-server: tollgate's RedisStore with one rule
// and with the three-rule stack of redis.bench.mjs (client, tenant, global), 64 decisions
// in flight (one batched script run) and one at a time (one run each), beside
// rate-limiter-flexible's RateLimiterRedis.consume and a bare EVALSHA of `return 1`.
// Instruction counts do not depend on what else runs on the machine, so this is the figure
// to compare when throughput is noise.
//
//   pnpm build && node test/bench/redis-script.callgrind.mjs [--decisions 6400]
//
// Starts its own redis-server under valgrind on a free loopback port (needs valgrind and
// callgrind_annotate), warms every workload's 10,000 keys up, then for each workload dumps
// the counts before and after `--decisions` decisions and reads the inclusive count of
// Redis' `processCommand` (every command the workload sent, scripts included).
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { callgrindRedis } from './util.mjs';

const { values } = parseArgs({
  options: {
    decisions: { type: 'string', default: '6400' },
    // Only the workloads whose name contains this text.
    only: { type: 'string', default: '' },
    // Prints the functions with the most inclusive instructions of each workload.
    top: { type: 'string', default: '0' },
    // Keeps the callgrind dumps in this directory (for callgrind_annotate by hand).
    keep: { type: 'string', default: '' },
  },
});
const TOP = Number(values.top);
const DECISIONS = Number(values.decisions);
const KEYS = 10_000;
const HIGH = 1_000_000_000;
const keyOf = (i) => `10.${(i >> 8) & 255}.${i & 255}.1`;

// TOLLGATE_CORE / TOLLGATE_REDIS=/path/to/dist/index.mjs measure another build with this harness.
const build = (env, rel) => (process.env[env] ? pathToFileURL(process.env[env]).href : new URL(rel, import.meta.url).href);
const core = await import(build('TOLLGATE_CORE', '../../packages/core/dist/index.mjs'));
const { RedisStore } = await import(build('TOLLGATE_REDIS', '../../packages/redis/dist/index.mjs'));
const { RateLimiterRedis } = await import('rate-limiter-flexible');

const { client, proc, dir, counted } = await callgrindRedis({ top: TOP, instrAtStart: false });

const store = new RedisStore({ client, timeoutMs: 60_000 });
// Windows of an hour: a run under valgrind lasts minutes, and a window ending during a
// workload would make its decisions start new windows (SET with a new expiry) instead of
// updating entries (SET ... KEEPTTL), a different cost depending on when it ran.
const one = core.createLimiter({ rules: [{ name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' }], store, prefix: 'c1' });
const three = core.createLimiter({
  rules: [
    { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' },
    { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1h' },
    { name: 'global', key: () => 'all', algorithm: 'token-bucket', limit: HIGH, window: '1s' },
  ],
  store,
  prefix: 'c3',
});
// The stack of redis.bench.mjs with a per-client fixed window: four rules, one of each common kind.
const four = core.createLimiter({
  rules: [
    { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' },
    { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1h' },
    { name: 'global', key: () => 'all', algorithm: 'token-bucket', limit: HIGH, window: '1s' },
    { name: 'hour', key: (r) => r.ip, algorithm: 'fixed-window', limit: HIGH, window: '1h' },
  ],
  store,
  prefix: 'c4',
});
// A refusal: a client's own sliding window admits, its hourly quota of one (used by the warm-up) refuses.
const refused = core.createLimiter({
  rules: [
    { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' },
    { name: 'quota', key: (r) => r.ip, limit: 1, window: '1h' },
  ],
  store,
  prefix: 'cr',
});
// A refusal by one rule alone: its hourly quota of one, used by the warm-up.
const refusedOne = core.createLimiter({ rules: [{ name: 'quota', key: (r) => r.ip, limit: 1, window: '1h' }], store, prefix: 'cq' });
const rlf = new RateLimiterRedis({ storeClient: client, points: HIGH, duration: 3600, keyPrefix: 'rlf' });
const sha = await client.script('LOAD', 'return 1');

let wrong = 0;
const check = (d) => {
  if (d.degraded !== undefined || !d.allowed) wrong++;
};
const checkRefused = (d) => {
  if (d.degraded !== undefined || d.allowed) wrong++;
};
/** `n` decisions, `inflight` at a time (all of a round requested in one tick). */
async function drive(op, n, inflight) {
  for (let i = 0; i < n; i += inflight) {
    const round = [];
    for (let j = i; j < Math.min(n, i + inflight); j++) round.push(op(j % KEYS));
    await Promise.all(round);
  }
}
const workloads = [
  ['tollgate RedisStore, 1 rule, 64 in flight', (i) => one.consume({ ip: keyOf(i) }).then(check), 64],
  ['tollgate RedisStore, 3-rule stack, 64 in flight', (i) => three.consume({ ip: keyOf(i) }).then(check), 64],
  ['tollgate RedisStore, 1 rule, 1 in flight', (i) => one.consume({ ip: keyOf(i) }).then(check), 1],
  ['tollgate RedisStore, 3-rule stack, 1 in flight', (i) => three.consume({ ip: keyOf(i) }).then(check), 1],
  ['tollgate RedisStore, 4-rule stack, 1 in flight', (i) => four.consume({ ip: keyOf(i) }).then(check), 1],
  ['tollgate RedisStore, 2-rule stack refused, 1 in flight', (i) => refused.consume({ ip: keyOf(i) }).then(checkRefused), 1],
  ['tollgate RedisStore, 1 rule refused, 1 in flight', (i) => refusedOne.consume({ ip: keyOf(i) }).then(checkRefused), 1],
  ['rate-limiter-flexible RateLimiterRedis.consume', (i) => rlf.consume(keyOf(i)), 1],
  ['bare EVALSHA of return 1', (i) => client.evalsha(sha, 1, keyOf(i)), 1],
];
const rows = [];
try {
  // Every key written once, so that the measured decisions update existing entries.
  // (The refusal workload's warm-up uses each client's quota of one.)
  for (const [name, op, inflight] of workloads) {
    if (!name.includes(values.only) && !name.startsWith('bare')) continue;
    const warm = name.includes('2-rule stack refused')
      ? (i) => refused.consume({ ip: keyOf(i) })
      : name.includes('1 rule refused')
        ? (i) => refusedOne.consume({ ip: keyOf(i) })
        : op;
    await drive(warm, KEYS, Math.max(inflight, 64));
  }
  execFileSync('callgrind_control', ['-i', 'on', String(proc.pid)], { stdio: 'ignore' });
  for (const [name, op, inflight] of workloads) {
    if (!name.includes(values.only) && !name.startsWith('bare')) continue;
    counted();
    const before = wrong;
    await drive(op, DECISIONS, inflight);
    const n = counted();
    if (wrong > before) console.error(`${name}: ${wrong - before} decisions not as expected`);
    if (n === 0) throw new Error(`${name}: no processCommand counted`);
    rows.push({ name, perDecision: n / DECISIONS });
  }
} finally {
  client.disconnect();
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
  if (values.keep !== '') execFileSync('cp', ['-r', dir, values.keep]);
  rmSync(dir, { recursive: true, force: true });
}
if (wrong > 0) throw new Error(`${wrong} tollgate decisions were degraded or refused; the counts are void`);
const bare = rows.at(-1).perDecision;
console.log('| workload | redis-server instructions per decision | × bare EVALSHA |');
console.log('| --- | ---: | ---: |');
for (const r of rows)
  console.log(`| ${r.name} | ${Math.round(r.perDecision).toLocaleString('en-US')} | ${(r.perDecision / bare).toFixed(1)} |`);
console.error(`(${DECISIONS} decisions per workload)`);
