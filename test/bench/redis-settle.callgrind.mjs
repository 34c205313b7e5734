// Instructions redis-server executes per reservation settle (docs/reserve.md), counted by
// valgrind's callgrind inside redis-server as redis-script.callgrind.mjs counts decisions:
// a two-rule stack (a token bucket per key, a day's fixed window per key), one at a time,
// reserving 10 and settling at 30 (a charge) or at 4 (a give-back), beside the reserve
// itself (a consume), a settle with another key's reserve apart and in one batched call, and a
// bare EVALSHA of `return 1`.
//
//   pnpm build && node test/bench/redis-settle.callgrind.mjs [--decisions 2000]
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { callgrindRedis } from './util.mjs';

const { values } = parseArgs({
  options: {
    decisions: { type: 'string', default: '2000' },
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
const KEYS = 1000;
const HIGH = 1_000_000_000;
const keyOf = (i) => `10.${(i >> 8) & 255}.${i & 255}.1`;

// TOLLGATE_CORE / TOLLGATE_REDIS=/path/to/dist/index.mjs measure another build with this harness.
const build = (env, rel) => (process.env[env] ? pathToFileURL(process.env[env]).href : new URL(rel, import.meta.url).href);
const core = await import(build('TOLLGATE_CORE', '../../packages/core/dist/index.mjs'));
const { RedisStore } = await import(build('TOLLGATE_REDIS', '../../packages/redis/dist/index.mjs'));

const { client, proc, dir, counted } = await callgrindRedis({ top: TOP });

const store = new RedisStore({ client, timeoutMs: 60_000 });
const limiter = core.createLimiter({
  rules: [
    { name: 'tokens', key: (r) => r.ip, algorithm: 'token-bucket', limit: HIGH, window: '1h' },
    { name: 'day', key: (r) => r.ip, algorithm: 'fixed-window', limit: HIGH, window: '1d' },
  ],
  store,
  prefix: 's2',
});
const sha = await client.script('LOAD', 'return 1');

/** Reservations made ahead (uncounted), settled in the counted part. */
async function reserved(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await limiter.reserve({ ip: keyOf(i % KEYS) }, { cost: 10 }));
  return out;
}
const rows = [];
try {
  for (let i = 0; i < KEYS; i++) await limiter.consume({ ip: keyOf(i) });
  for (const [name, actual] of [
    ['settle above the estimate (10 → 30)', 30],
    ['settle below the estimate (10 → 4)', 4],
  ]) {
    if (!name.includes(values.only)) continue;
    const rs = await reserved(DECISIONS);
    counted();
    for (const r of rs) await r.settle(actual);
    rows.push({ name, per: counted() / DECISIONS });
  }
  counted();
  for (let i = 0; i < DECISIONS; i++) await limiter.reserve({ ip: keyOf(i % KEYS) }, { cost: 10 });
  rows.push({ name: 'the reserve itself (a consume of the stack)', per: counted() / DECISIONS });
  // A settle and another key's reserve: one after the other (two calls), or asked in the
  // same tick (one batched call).
  for (const [name, together] of [
    ['a settle (10 → 30) then a reserve, one after the other', false],
    ['a settle (10 → 30) and a reserve in one tick (one batched call)', true],
  ]) {
    if (!name.includes(values.only)) continue;
    const rs = await reserved(DECISIONS);
    counted();
    for (let i = 0; i < DECISIONS; i++) {
      const next = { ip: keyOf((i + KEYS / 2) % KEYS) };
      if (together) await Promise.all([rs[i].settle(30), limiter.reserve(next, { cost: 10 })]);
      else {
        await rs[i].settle(30);
        await limiter.reserve(next, { cost: 10 });
      }
    }
    rows.push({ name, per: counted() / DECISIONS });
  }
  counted();
  for (let i = 0; i < DECISIONS; i++) await client.evalsha(sha, 1, keyOf(i % KEYS));
  rows.push({ name: 'bare EVALSHA of return 1', per: counted() / DECISIONS });
} finally {
  client.disconnect();
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
  if (values.keep !== '') execFileSync('cp', ['-r', dir, values.keep]);
  rmSync(dir, { recursive: true, force: true });
}
const bare = rows.at(-1).per;
console.log('| two-rule stack, one at a time | redis-server instructions per call | × bare EVALSHA |');
console.log('| --- | ---: | ---: |');
for (const r of rows) console.log(`| ${r.name} | ${Math.round(r.per).toLocaleString('en-US')} | ${(r.per / bare).toFixed(1)} |`);
console.error(`(${DECISIONS} calls per workload)`);
