// Benchmark of @tollgate/redis (issue 3): decisions per second through RedisStore with 64
// decisions in flight, for one rule and for a stack of three rules, beside
// rate-limiter-flexible's RateLimiterRedis.consume, rate-limit-redis' increment, and the
// ceiling: a bare EVALSHA of a trivial script from the same kind of ioredis client.
//
//   pnpm build && node test/bench/redis.bench.mjs [--time 2000] [--runs 5] [--inflight 64]
//
// It imports the BUILT packages (dist/esm) and starts its own redis-server on a free port.
// Every client is ioredis with enableAutoPipelining. Workloads run interleaved, --runs
// rounds of each; the figure is the median. Keys come from a pool of 10,000 clients with
// limits high enough that every decision is an admission (the write path).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, median, spread } from './util.mjs';

const { values } = parseArgs({
  options: {
    time: { type: 'string', default: '2000' },
    runs: { type: 'string', default: '5' },
    inflight: { type: 'string', default: '64' },
  },
});
const TIME = Number(values.time);
const RUNS = Number(values.runs);
const INFLIGHT = Number(values.inflight);
const KEYS = 10_000;
const keyOf = (i) => `10.${(i >> 8) & 255}.${i & 255}.1`;

/** Runs `op(i)` from INFLIGHT concurrent loops for TIME ms; returns operations per second. */
async function measure(op) {
  let done = 0;
  let next = 0;
  const end = performance.now() + TIME;
  const loop = async () => {
    while (performance.now() < end) {
      await op(next++ % KEYS);
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: INFLIGHT }, loop));
  return done / ((performance.now() - t0) / 1000);
}

/** A private redis-server on a free port; resolves once a fresh client gets PONG. */
async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-redis-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    const ok = await probe.connect().then(
      () => probe.ping(),
      () => undefined,
    );
    probe.disconnect();
    if (ok === 'PONG') break;
    if (Date.now() > deadline) throw new Error('redis-server did not start within 20 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const server = await startRedis();
const client = () => new Redis({ port: server.port, host: '127.0.0.1', enableAutoPipelining: true });

const { createLimiter } = await import('../../packages/core/dist/esm/index.js');
const { RedisStore } = await import('../../packages/redis/dist/esm/index.js');
const { RateLimiterRedis } = await import('rate-limiter-flexible');
const { RedisStore: RateLimitRedisStore } = await import('rate-limit-redis');

const HIGH = 1_000_000_000;
const workloads = {};
// Every tollgate decision must come from Redis: a generous deadline (this measures
// throughput, not the failure policy), and any degraded decision is counted and reported.
let degraded = 0;
const redisStore = () => new RedisStore({ client: client(), timeoutMs: 10_000 });
const decide = async (l, req) => {
  const d = await l.consume(req);
  if (d.degraded !== undefined || !d.allowed) degraded++;
};

{
  const c = client();
  const sha = await c.script('LOAD', 'return 1');
  workloads['bare EVALSHA (ceiling)'] = (i) => c.evalsha(sha, 1, keyOf(i));
}
{
  const l = createLimiter({ rules: [{ name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1m' }], store: redisStore(), prefix: 'b1' });
  workloads['tollgate RedisStore, 1 rule'] = (i) => decide(l, { ip: keyOf(i) });
}
{
  const rules = [
    { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1m' },
    { name: 'burst', key: (r) => r.ip, algorithm: 'token-bucket', limit: HIGH, window: '1s' },
    { name: 'hour', key: (r) => r.ip, algorithm: 'fixed-window', limit: HIGH, window: '1h' },
  ];
  const l = createLimiter({ rules, store: redisStore(), prefix: 'b3' });
  workloads['tollgate RedisStore, 3-rule stack'] = (i) => decide(l, { ip: keyOf(i) });
}
{
  const rl = new RateLimiterRedis({ storeClient: client(), points: HIGH, duration: 60, keyPrefix: 'rlf' });
  workloads['rate-limiter-flexible RateLimiterRedis.consume'] = (i) => rl.consume(keyOf(i));
}
{
  const c = client();
  const store = new RateLimitRedisStore({ sendCommand: (command, ...args) => c.call(command, ...args), prefix: 'rlr:' });
  store.init({ windowMs: 60_000 });
  workloads['rate-limit-redis increment'] = (i) => store.increment(keyOf(i));
}

const names = Object.keys(workloads);
for (const name of names) await measure(workloads[name]); // warm-up: JIT, script caches, keys
const results = Object.fromEntries(names.map((n) => [n, []]));
for (let r = 0; r < RUNS; r++) for (const name of names) results[name].push(await measure(workloads[name]));

const ceiling = median(results[names[0]]);
console.log(`redis-server ${server.port}, ${INFLIGHT} in flight, ${TIME} ms x ${RUNS} runs (median), node ${process.version}`);
console.log('| workload | decisions/s | ± | vs bare EVALSHA |');
console.log('| --- | ---: | ---: | ---: |');
for (const name of names) {
  const m = median(results[name]);
  console.log(
    `| ${name} | ${Math.round(m).toLocaleString('en-US')} | ${(spread(results[name]) * 100).toFixed(1)}% | ${((m / ceiling) * 100).toFixed(0)}% |`,
  );
}
if (degraded > 0) console.log(`WARNING: ${degraded} tollgate decisions did not come from Redis; the figures are void`);
await server.stop();
process.exit(degraded > 0 ? 1 : 0);
