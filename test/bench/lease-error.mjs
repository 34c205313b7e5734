// The error of leased decisions against exact ones on realistic traces (docs/distributed.md,
// "Leases"), as tables for the docs: `tollgate compare --lease` (packages/cli/src/lease.ts:
// the real RedisStore on supplied time, one store deciding exactly, then one store with
// `lease` per instance, each request at a random instance) on a private redis-server, for
// Poisson arrivals at the limit and at three times it, and for bursts (2/s for 20 s, then
// 200/s for 2 s, over and over). Each trace is one command a user can run on their own.
//
//   pnpm build
//   node test/bench/lease-error.mjs [--instances 4] [--seconds 60]
import { parseArgs } from 'node:util';
import { startRedis } from './util.mjs';

const { run, defaultIo } = await import(new URL('../../packages/cli/dist/index.mjs', import.meta.url).href);

const { values } = parseArgs({
  options: { instances: { type: 'string', default: '4' }, seconds: { type: 'string', default: '60' } },
});
const SECONDS = Number(values.seconds);
const ALGORITHMS = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-meter', 'sliding-buckets'];
const POLICY = ['--limit', '100', '--window', '10s', '--lease', 'max=20,ttl=1s', '--instances', values.instances];

/** Quiet (2/s) for 20 s, then 2 s at 200/s, over and over, as arrival patterns. */
function bursts() {
  const out = [];
  for (let t = 0, seed = 3; t < SECONDS; t += 22) {
    out.push('-p', `poisson 2/s for ${Math.min(20, SECONDS - t)}s from ${t}s seed ${seed++}`);
    if (t + 20 < SECONDS) out.push('-p', `poisson 200/s for ${Math.min(2, SECONDS - t - 20)}s from ${t + 20}s seed ${seed++}`);
  }
  return out;
}

const traces = {
  'Poisson at the limit (10/s)': ['-p', `poisson 10/s for ${SECONDS}s seed 1`],
  'Poisson at 3× the limit': ['-p', `poisson 30/s for ${SECONDS}s seed 2`],
  'bursts (2/s, then 200/s for 2 s)': bursts(),
};

const redis = await startRedis();
const rows = [];
try {
  for (const [name, patterns] of Object.entries(traces)) {
    const argv = ['compare', '-a', ALGORITHMS.join(','), ...POLICY, ...patterns, '--redis', `redis://127.0.0.1:${redis.port}`];
    console.error(`tollgate ${argv.map((a) => (/[\s,]/.test(a) && !a.startsWith('max=') ? `"${a}"` : a)).join(' ')}`);
    const out = [];
    const code = await run([...argv, '--json'], { ...defaultIo, stdout: (t) => out.push(t) });
    if (code !== 0) throw new Error(`tollgate compare exited with ${code}: ${out.join('')}`);
    rows.push([name, JSON.parse(out.join(''))]);
  }
} finally {
  await redis.stop();
}

const [, first] = rows[0];
console.log(
  `${first.lease.instances} instances, L = 100 per 10 s, lease { max: ${first.lease.max}, ttl: ${first.lease.ttlMs} ms }, ${SECONDS} s of arrivals\n`,
);
const signed = (d, of) =>
  `${d > 0 ? '+' : d < 0 ? '−' : ''}${Math.abs(d)}${d === 0 ? '' : ` (${d > 0 ? '+' : '−'}${Math.abs((100 * d) / of).toFixed(1)} %)`}`;
console.log(`| trace | ${ALGORITHMS.join(' | ')} |`);
console.log(`| --- |${' --- |'.repeat(ALGORITHMS.length)}`);
for (const [name, j] of rows)
  console.log(`| ${name} | ${j.policies.map((p) => signed(p.leased.difference, p.summary.admitted)).join(' | ')} |`);
console.log('\nmost admitted in any W, exact / leased (and leased in W − ttl):\n');
console.log(`| trace | ${ALGORITHMS.join(' | ')} |`);
console.log(`| --- |${' --- |'.repeat(ALGORITHMS.length)}`);
for (const [name, j] of rows) {
  const cells = j.policies.map((p) => `${p.summary.busiest.count} / ${p.leased.summary.busiest.count} (${p.leased.shortened.count})`);
  console.log(`| ${name} | ${cells.join(' | ')} |`);
}
