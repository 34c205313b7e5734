// Soak (issue 9, item 6): mixed traffic for a long time against an Express and a Fastify
// app on a RedisStore, each app in its own process (test/reliability/helpers/app.ts, run
// from the TypeScript sources), load from separate load-generator processes. Not part of
// the test suite: it runs for minutes.
//
//   node test/bench/soak.mjs [--minutes 10] [--sample 10] [--json out.json]
//
// Every `--sample` seconds each app reports RSS, heap (after a full GC: the apps run with
// --expose-gc), its active handles and resources. At the end: a least-squares trend of
// heap and RSS over the samples after the first minute (warm-up), the handles and timers
// of each app idle before and idle after the load (equal: nothing leaked), and a SCAN of
// Redis for keys without a TTL (none may exist). Exits 1 if any check fails.
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    sample: { type: 'string', default: '10' },
    json: { type: 'string' },
  },
});
const durationMs = Number(values.minutes) * 60_000;
const sampleMs = Number(values.sample) * 1000;
const helpers = new URL('../reliability/helpers/', import.meta.url);
const loader = fileURLToPath(new URL('ts-loader.mjs', helpers));
const MB = 1024 * 1024;

const children = new Set();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

function child(file, arg, execArgv = []) {
  const c = fork(fileURLToPath(new URL(file, helpers)), [JSON.stringify(arg)], {
    execArgv: ['--import', loader, ...execArgv],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(c);
  c.once('exit', () => children.delete(c));
  return c;
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-soak-redis-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  children.add(proc);
  let client;
  for (const deadline = Date.now() + 10_000; ; ) {
    client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.ping();
      break;
    } catch {
      client.disconnect();
      if (Date.now() > deadline) throw new Error('redis-server did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    port,
    client,
    async stop() {
      client.disconnect();
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function startApp(framework, redisPort) {
  const c = child(
    'app.ts',
    {
      framework,
      redis: { port: redisPort },
      onStoreError: 'local',
      timeoutMs: 100,
      storePrefix: `soak-${framework}:`,
      rules: [
        { name: 'ip', limit: 100_000, window: '1m' },
        { name: 'user', keyBy: 'header:x-user', limit: 20, window: '10s', algorithm: 'sliding-log' },
        { name: 'tenant', keyBy: 'header:x-tenant', limit: 300, window: '1m', algorithm: 'token-bucket' },
        { name: 'burst', keyBy: 'header:x-burst', limit: 5, window: '2s', algorithm: 'leaky-bucket' },
        { name: 'global', keyBy: 'const', limit: 10_000_000, window: '1h', algorithm: 'fixed-window' },
      ],
    },
    ['--expose-gc'],
  );
  return new Promise((resolve, reject) => {
    c.once('exit', (code) => reject(new Error(`${framework} app exited with ${code}`)));
    c.on('message', (m) => {
      if (m.type !== 'ready') return;
      resolve({
        framework,
        port: m.port,
        stats: () =>
          new Promise((res) => {
            const on = (x) => {
              if (x.type !== 'stats') return;
              c.off('message', on);
              res(x);
            };
            c.on('message', on);
            c.send('stats');
          }),
        stop: () =>
          new Promise((res) => {
            c.removeAllListeners('exit');
            c.once('exit', (code) => res(code));
            c.send('stop');
          }),
      });
    });
  });
}

/** One wave of mixed traffic against one app: several generators with different key mixes. */
function wave(port, ms) {
  const mixes = [
    { rotate: { header: 'x-user', prefix: 'u', count: 500 }, headers: { 'x-tenant': 't1' } },
    { rotate: { header: 'x-user', prefix: 'hot', count: 3 }, headers: { 'x-tenant': 't2' } },
    { rotate: { header: 'x-burst', prefix: 'b', count: 50 } },
    { rotate: { header: 'x-tenant', prefix: 'tenant', count: 2000 } },
  ];
  return Promise.all(
    mixes.map(
      (mix) =>
        new Promise((resolve, reject) => {
          const c = child('load.ts', {
            ports: [port],
            workers: 2,
            pauseMs: 5,
            durationMs: ms,
            maxRequests: 1e9,
            requestTimeoutMs: 5000,
            ...mix,
          });
          let result;
          c.on('message', (m) => {
            if (m.type === 'done') result = m;
          });
          c.once('exit', () => (result ? resolve(result) : reject(new Error('load generator failed'))));
        }),
    ),
  );
}

/** Least-squares slope of ys over xs. */
function slope(xs, ys) {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

const redis = await startRedis();
const apps = await Promise.all(['express', 'fastify'].map((f) => startApp(f, redis.port)));
// Idle figures before any traffic (after one warm-up request each, so lazy handles exist).
for (const app of apps) await fetch(`http://127.0.0.1:${app.port}/`).then((r) => r.arrayBuffer());
await new Promise((r) => setTimeout(r, 500));
const before = await Promise.all(apps.map((a) => a.stats()));

const start = Date.now();
const samples = apps.map(() => []);
const statuses = apps.map(() => ({}));
const latencies = apps.map(() => []);
const sampler = setInterval(async () => {
  const t = (Date.now() - start) / 60_000;
  for (const [i, app] of apps.entries()) {
    const s = await app.stats();
    samples[i].push({ t, rss: s.rss, heap: s.heapUsed, sockets: s.handles.Socket ?? 0, timers: s.resources.Timeout ?? 0 });
  }
  const last = samples[0].at(-1);
  process.stderr.write(`${t.toFixed(1)} min: express heap ${(last.heap / MB).toFixed(1)} MB rss ${(last.rss / MB).toFixed(1)} MB\n`);
}, sampleMs);

while (Date.now() - start < durationMs) {
  const ms = Math.min(30_000, durationMs - (Date.now() - start));
  if (ms < 1000) break;
  const results = await Promise.all(apps.map((a) => wave(a.port, ms)));
  for (const [i, perGen] of results.entries()) {
    for (const r of perGen) {
      for (const s of r.status) statuses[i][s] = (statuses[i][s] ?? 0) + 1;
      latencies[i] = latencies[i].concat(r.ms.filter((_, j) => j % 10 === 0));
    }
  }
}
clearInterval(sampler);
await new Promise((r) => setTimeout(r, 3000)); // keep-alive sockets of the generators close
const after = await Promise.all(apps.map((a) => a.stats()));

// Keys without a TTL, anywhere in Redis.
let noTtl = 0;
let keys = 0;
let cursor = '0';
do {
  const [next, batch] = await redis.client.scan(cursor, 'COUNT', 1000);
  cursor = next;
  keys += batch.length;
  for (const k of batch) if ((await redis.client.pttl(k)) === -1) noTtl++;
} while (cursor !== '0');

const report = { minutes: Number(values.minutes), apps: [], redis: { keys, keysWithoutTtl: noTtl } };
let ok = noTtl === 0;
for (const [i, app] of apps.entries()) {
  const warm = samples[i].filter((s) => s.t >= 1);
  const xs = warm.map((s) => s.t);
  const heapSlope = slope(
    xs,
    warm.map((s) => s.heap / MB),
  );
  const rssSlope = slope(
    xs,
    warm.map((s) => s.rss / MB),
  );
  const sorted = latencies[i].sort((a, b) => a - b);
  const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  const total = Object.values(statuses[i]).reduce((a, b) => a + b, 0);
  const entry = {
    framework: app.framework,
    requests: total,
    statuses: statuses[i],
    latencyMs: { p50: q(0.5), p99: q(0.99), max: sorted.at(-1) },
    heapMB: { first: warm[0]?.heap / MB, last: warm.at(-1)?.heap / MB, slopePerMin: heapSlope },
    rssMB: { first: warm[0]?.rss / MB, last: warm.at(-1)?.rss / MB, slopePerMin: rssSlope },
    idleBefore: { handles: before[i].handles, timers: before[i].resources.Timeout ?? 0 },
    idleAfter: { handles: after[i].handles, timers: after[i].resources.Timeout ?? 0 },
  };
  report.apps.push(entry);
  // No growth trend: the heap may not grow by more than 1 MB per 10 minutes of traffic.
  if (!(heapSlope < 0.1)) ok = false;
  if (JSON.stringify(before[i].handles) !== JSON.stringify(after[i].handles)) ok = false;
  if ((before[i].resources.Timeout ?? 0) !== (after[i].resources.Timeout ?? 0)) ok = false;
  if (Object.keys(statuses[i]).some((s) => Number(s) >= 500 || Number(s) <= 0)) ok = false;
}
const codes = await Promise.all(apps.map((a) => a.stop()));
if (codes.some((c) => c !== 0)) ok = false;
report.appExitCodes = codes;
report.ok = ok;
await redis.stop();
console.log(JSON.stringify(report, null, 2));
if (values.json) writeFileSync(values.json, JSON.stringify({ report, samples }, null, 2));
process.exit(ok ? 0 : 1);
