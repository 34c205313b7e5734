// Instructions per HTTP request of the Redis-backed limiters (docs/benchmarks.md,
// "Per HTTP request, Redis store"), counted by valgrind's callgrind on both sides at once: in the
// server process (Node: framework, limiter, Redis client) and in redis-server (every
// instruction it ran while the batch was served). Each variant gets its own redis-server,
// both under callgrind, so the Redis side of one limiter is never mixed with another's;
// instruction counts do not depend on the machine's load, so variants run side by side.
//
//   pnpm build && node test/bench/callgrind/redis-http.mjs [--warmup 2000] [--batch 1000] [--batches 2]
//       [--connections 4] [--only <substring>]... [--parallel 3] [--threads] [--keep <dir>]
//
// Variants come from ../http/variants.mjs (bare Express, Fastify and node:http, tollgate's RedisStore
// with one rule and four, rate-limit-redis, rate-limiter-flexible, @fastify/rate-limit),
// each started by http-server.mjs under `node --single-threaded`. After `warmup`
// uninstrumented requests (JIT, caches, every key written) it counts `batches` batches of
// `batch` requests over `connections` keep-alive connections (client.mjs) and prints, per variant, Node
// instructions per request (the whole process) and redis-server instructions per request
// spent serving it (reading, running and answering its commands; of which processCommand,
// the commands alone). Not redis-server's totals: its timers run by the wall clock, which
// valgrind stretches. Needs valgrind,
// callgrind_control and callgrind_annotate.
//
// `--threads`: Node runs with its helper threads (not `--single-threaded`) and callgrind
// counts each thread apart (`--separate-threads=yes`): the main thread's count, which
// runs the requests and leaves V8's optimizing compiler and concurrent GC marking to the
// helpers, is printed beside the whole process's. The main thread still pays lazy and
// baseline compilation and its share of each scavenge, but not TurboFan's compile jobs,
// which moved the single-threaded count by a third from batch to batch; and V8 keeps a
// fixed GC schedule (`--predictable-gc-schedule`: no heap growth that depends on timing).
// With several
// batches, each figure is also given as the minimum and the median of the batches.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { freePort } from '../util.mjs';

const here = (f) => fileURLToPath(new URL(f, import.meta.url));
const { values } = parseArgs({
  options: {
    warmup: { type: 'string', default: '2000' },
    batch: { type: 'string', default: '1000' },
    batches: { type: 'string', default: '2' },
    parallel: { type: 'string', default: '3' },
    connections: { type: 'string', default: '4' },
    only: { type: 'string', multiple: true },
    threads: { type: 'boolean', default: false },
    // Keeps each variant's callgrind dumps in <dir>/<variant> (for callgrind_annotate by hand).
    keep: { type: 'string', default: '' },
  },
});
const WARMUP = Number(values.warmup);
const BATCH = Number(values.batch);
const BATCHES = Number(values.batches);

const ALL = [
  'express bare',
  'express tollgate redis 1 rule',
  'express tollgate redis 4 rules',
  'express rate-limit-redis',
  'express rate-limiter-flexible redis',
  'fastify bare',
  'fastify tollgate redis 1 rule',
  'fastify tollgate redis 4 rules',
  'fastify @fastify/rate-limit redis',
  'node bare',
  'node tollgate redis 1 rule',
  'node tollgate redis 4 rules',
];
const { variants } = await import('../http/variants.mjs');
const extra = Object.keys(variants).filter((n) => n.includes('node-redis'));
const picked = [...ALL, ...extra].filter((n) => !values.only || values.only.some((o) => n.includes(o)));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function ping(port) {
  return new Promise((resolve) => {
    const s = new Socket();
    const done = (ok) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(2000, () => done(false));
    s.once('error', () => done(false));
    s.on('data', (d) => done(d.toString().startsWith('+PONG')));
    s.connect(port, '127.0.0.1', () => s.write('PING\r\n'));
  });
}

/** Every process started here, killed if the harness exits early (a failed variant). */
const live = new Set();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

/** Starts `cmd args` under callgrind with instrumentation off. */
function underCallgrind(out, cmd, args, stdio = ['ignore', 'pipe', 'pipe'], threads = false) {
  const p = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all-non-file',
      ...(threads ? ['--separate-threads=yes'] : []),
      `--callgrind-out-file=${out}`,
      cmd,
      ...args,
    ],
    { stdio },
  );
  live.add(p);
  p.once('exit', () => live.delete(p));
  return p;
}

// Asynchronous: the variants run side by side, and a synchronous child would stop them all.
const run = promisify(execFile);
const control = (pid, ...args) => run('callgrind_control', [...args, String(pid)]);
const totals = (file) => Number(/^totals:\s+(\d+)/m.exec(readFileSync(file, 'utf8'))?.[1] ?? Number.NaN);
/** Inclusive instructions of each named redis-server function in a dump. */
function inclusive(file, names) {
  const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 64 << 20 }).toString();
  return names.map((name) => {
    const m = new RegExp(`([\\d,]+) \\([ \\d.]+%\\)\\s+\\S*:${name} `).exec(text);
    return m ? Number(m[1].replace(/,/g, '')) : 0;
  });
}

/**
 * Node instructions per request in batch `b`: the whole process, and with `--threads` the
 * main thread's (dump `node.out.<b>-01`; the helpers' dumps are `-02`...).
 */
function nodeCount(dir, b) {
  if (!values.threads) return { node: totals(join(dir, `node.out.${b}`)) / BATCH };
  const files = readdirSync(dir).filter((f) => f.startsWith(`node.out.${b}-`));
  const all = files.reduce((sum, f) => sum + totals(join(dir, f)), 0);
  return { node: all / BATCH, main: totals(join(dir, `node.out.${b}-01`)) / BATCH };
}

async function measure(name) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-cg-http-'));
  const redisPort = await freePort();
  const redis = underCallgrind(
    join(dir, 'redis.out'),
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    'ignore',
  );
  let node;
  try {
    const deadline = Date.now() + 600_000;
    while (!(await ping(redisPort))) {
      if (Date.now() > deadline) throw new Error(`${name}: redis-server did not start`);
      await sleep(300);
    }
    node = underCallgrind(
      join(dir, 'node.out'),
      'node',
      [...(values.threads ? ['--predictable-gc-schedule'] : ['--single-threaded']), here('./http-server.mjs'), name, String(redisPort)],
      undefined,
      values.threads,
    );
    let log = '';
    node.stderr.on('data', (d) => {
      log += d;
    });
    const port = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`${name}: server not ready in 1200 s\n${log}`)), 1_200_000);
      node.stdout.on('data', (d) => {
        out += d;
        const m = /ready (\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      node.once('exit', (code) => reject(new Error(`${name}: server exited with ${code}\n${log}`)));
    });
    const client = (n) => run('node', [here('./client.mjs'), String(port), String(n), values.connections]);
    await client(WARMUP);
    const rows = [];
    for (let b = 1; b <= BATCHES; b++) {
      await Promise.all([control(node.pid, '-i', 'on'), control(redis.pid, '-i', 'on')]);
      await client(BATCH);
      await Promise.all([control(node.pid, '-d'), control(redis.pid, '-d')]);
      await Promise.all([control(node.pid, '-i', 'off'), control(redis.pid, '-i', 'off')]);
      // Not redis-server's totals: its timers (serverCron) run by the wall clock, which
      // valgrind stretches. Serving the requests is reading and running them (readQueryFromClient
      // includes processCommand) and writing the replies.
      const [read, write, commands] = inclusive(join(dir, `redis.out.${b}`), [
        'readQueryFromClient',
        'handleClientsWithPendingWritesUsingThreads',
        'processCommand',
      ]);
      rows.push({ ...nodeCount(dir, b), redis: (read + write) / BATCH, commands: commands / BATCH });
    }
    return rows;
  } finally {
    for (const p of [node, redis]) {
      if (p && p.exitCode === null) {
        p.kill('SIGKILL');
        await new Promise((r) => p.once('exit', r));
      }
    }
    if (values.keep !== '') cpSync(dir, join(values.keep, name.replaceAll(/[^\w@-]+/g, '-')), { recursive: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = new Map();
const queue = [...picked];
await Promise.all(
  Array.from({ length: Math.max(1, Number(values.parallel)) }, async () => {
    for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
      const rows = await measure(name);
      results.set(name, rows);
      console.error(`[callgrind] ${name}: ${JSON.stringify(rows.map((r) => Object.values(r).map(Math.round)))}`);
    }
  }),
);

const k = (n) => `${(n / 1000).toFixed(1)}k`;
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `${BATCHES} batches of ${BATCH} requests on ${values.connections} connections after ${WARMUP} to warm up; figures per request, batches separated by /`,
);
console.log('');
const main = values.threads ? ' Node main thread | main: min / median | main over bare |' : '';
console.log(`| variant | Node instructions |${main} Node over bare | redis-server instructions | of which commands |`);
console.log(`| --- | ---: |${values.threads ? ' ---: | ---: | ---: |' : ''} ---: | ---: | ---: |`);
for (const name of picked) {
  const rows = results.get(name);
  const bareName = `${name.split(' ')[0]} bare`;
  const bare = name === bareName ? undefined : results.get(bareName);
  const over = (f) => (bare ? k(med(rows.map(f)) - med(bare.map(f))) : '—');
  const col = (f) => rows.map((r) => k(f(r))).join(' / ');
  const mainCols = values.threads
    ? ` ${col((r) => r.main)} | ${k(Math.min(...rows.map((r) => r.main)))} / ${k(med(rows.map((r) => r.main)))} | ${over((r) => r.main)} |`
    : '';
  console.log(
    `| ${name} | ${col((r) => r.node)} |${mainCols} ${over((r) => r.node)} | ${col((r) => r.redis)} | ${col((r) => r.commands)} |`,
  );
}
