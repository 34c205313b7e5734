// `pnpm bench`: the whole benchmark suite in one invocation (docs/benchmarks.md, "Throughput on one machine").
//
// HTTP variants (bare Express and Fastify, tollgate on each with memory and Redis, one rule
// and a four-rule stack, nothing and everything refused, and the peers), in-process
// decisions/s per algorithm, Redis decisions/s at 64 and 1024 in flight beside the bare
// EVALSHA ceiling, and heap/RSS bytes per key at 1M keys. Every figure is the median of
// --runs interleaved runs with its spread. Prints the suite's targets and the HTTP ratios,
// and rewrites the generated part of docs/benchmarks.md, between the GENERATED and KEEP
// markers; the hand-written parts before and after them are carried over verbatim.
//
//   pnpm bench                      # full run, about 12 minutes on 2 cores; writes docs/benchmarks.md
//   node test/bench/run.mjs --quick # smoke run (1 run, short phases); writes nothing unless --out
//   node test/bench/run.mjs --only http,redis --out /tmp/b.md
//
// Installs nothing: it uses the built packages (`pnpm build`, which `pnpm bench` runs first)
// and the dev dependencies already in node_modules; redis-server must be on the PATH.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { inProcessTable, memoryTable, runInProcess, runMemory } from './core.bench.mjs';
import { httpTable, runHttp } from './http.mjs';
import { redisTable, runRedis } from './redis.bench.mjs';
import { machine, startRedis } from './util.mjs';

const GENERATED = '<!-- GENERATED: from here to the KEEP marker, rewritten by `pnpm bench` (test/bench/run.mjs) -->';
const KEEP = '<!-- KEEP: everything below this line is hand-written and carried over by test/bench/run.mjs -->';
const SECTIONS = ['http', 'inprocess', 'memory', 'redis', 'adapters'];

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    runs: { type: 'string' },
    only: { type: 'string' },
    out: { type: 'string' },
    duration: { type: 'string' },
  },
});
const quick = values.quick;
const runs = Number(values.runs ?? (quick ? 1 : 3));
const sections = values.only ? values.only.split(',') : SECTIONS;
for (const s of sections) if (!SECTIONS.includes(s)) throw new Error(`--only: unknown section ${s}; known: ${SECTIONS.join(', ')}`);
const docPath = fileURLToPath(new URL('../../docs/benchmarks.md', import.meta.url));
const out = values.out ?? (quick ? undefined : docPath);
const cfg = {
  duration: Number(values.duration ?? (quick ? 1 : 3)),
  connections: 50,
  time: quick ? 200 : 1000,
  keys: quick ? 100_000 : 1_000_000,
  redisTime: quick ? 300 : 2000,
};

const log = (s) => process.stderr.write(`${s}\n`);
const started = new Date();
const host = { ...machine(), nproc: availableParallelism() };
log(`tollgate bench: ${host.nproc} CPUs (${host.model}), Node ${host.node}, load ${host.load.join(' ')}, ${runs} run(s)`);

const require = createRequire(import.meta.url);
const version = (name) => {
  try {
    return JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')).version;
  } catch {
    return JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
  }
};
const redisVersion = () => /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? '?';
const versions = {
  express: version('express'),
  fastify: version('fastify'),
  ioredis: version('ioredis'),
  'redis-server': redisVersion(),
  autocannon: version('autocannon'),
  'express-rate-limit': version('express-rate-limit'),
  'rate-limit-redis': version('rate-limit-redis'),
  'rate-limiter-flexible': version('rate-limiter-flexible'),
  '@fastify/rate-limit': version('@fastify/rate-limit'),
};

/**
 * The adapters' own work, in process (no sockets): fastify-hook.bench.mjs and
 * express-middleware.bench.mjs, run as they are; their Markdown output goes in the document.
 */
function script(file, args) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [fileURLToPath(new URL(file, import.meta.url)), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    p.stdout.on('data', (d) => {
      text += d;
    });
    p.once('exit', (code) => (code === 0 ? resolve(text.trim()) : reject(new Error(`${file} exited with ${code}`))));
  });
}

const redis = await startRedis();
const results = {};
const timings = {};
try {
  const phase = async (name, f) => {
    if (!sections.includes(name)) return;
    const t0 = Date.now();
    log(`— ${name}`);
    results[name] = await f();
    timings[name] = (Date.now() - t0) / 1000;
  };
  await phase('inprocess', () => runInProcess({ time: cfg.time, runs, log }));
  await phase('memory', () => runMemory({ keys: cfg.keys, runs, log }));
  await phase('redis', () => runRedis({ time: cfg.redisTime, runs, redis, log }));
  await phase('adapters', async () => ({
    fastify: await script(
      './fastify-hook.bench.mjs',
      quick ? ['--calls', '20000', '--rounds', '3'] : ['--calls', '200000', '--rounds', '9'],
    ),
    // Its calls and rounds are fixed (100 000 x 9); the smoke run leaves it out.
    express: quick ? undefined : await script('./express-middleware.bench.mjs', []),
  }));
  await phase('http', () => runHttp({ duration: cfg.duration, runs, connections: cfg.connections, redis, log }));
} finally {
  await redis.stop();
}
const loadEnd = loadavg().map((x) => x.toFixed(2));
const elapsed = (Date.now() - started.getTime()) / 1000;

// ---- targets: the suite's first goals, printed for comparison (docs/benchmarks-history.md) ----
const http = Object.fromEntries((results.http ?? []).map((r) => [r.name, r]));
const inproc = Object.fromEntries((results.inprocess ?? []).map((r) => [`${r.label}|${r.spread}`, r]));
const mem = Object.fromEntries((results.memory ?? []).map((r) => [r.label, r]));
const red = Object.fromEntries((results.redis ?? []).map((r) => [`${r.name}|${r.inflight}`, r]));
const targets = [];
const target = (what, goal, measured, met) => targets.push({ what, goal, measured, met });
const f2 = (x) => x.toFixed(2);
const us = (x) => `${x.toFixed(1)} µs`;
if (results.http) {
  const h = (n) => http[n];
  const ratio = (n, min) => target(`${n}: throughput ratio to bare`, `≥ ${min}`, f2(h(n).ratio), h(n).ratio >= min);
  const added = (n, max) => target(`${n}: server CPU added per request`, `≤ ${max} µs`, us(h(n).addedUs), h(n).addedUs <= max);
  ratio('fastify tollgate memory 1 rule', 0.95);
  added('fastify tollgate memory 1 rule', 1.0);
  ratio('fastify tollgate memory reject', 0.9);
  added('fastify tollgate memory reject', 2.0);
  ratio('express tollgate memory 1 rule', 0.95);
  added('express tollgate memory 1 rule', 4);
  added('express tollgate redis 1 rule', 9);
  added('fastify tollgate redis 1 rule', 8);
  ratio('fastify tollgate redis 1 rule', 0.7);
}
if (results.inprocess) {
  for (const spread of ['1 key', '100k keys']) {
    const one = inproc[`fixed-window|${spread}`];
    const four = inproc[`fixed-window, 4-rule stack|${spread}`];
    const fastest = one.fastest / four.fastest;
    const overall = one.perSec / four.perSec;
    target(
      `four-rule stack vs one rule, in-process, ${spread}`,
      '≤ 1.5× the time',
      `${f2(overall)}× overall (${f2(fastest)}× fastest batches)`,
      overall <= 1.5,
    );
  }
  for (const a of ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket meter', 'leaky-bucket queue']) {
    for (const [spread, min] of [
      ['1 key', 10e6],
      ['100k keys', 4e6],
    ]) {
      const r = inproc[`${a}|${spread}`];
      target(
        `${a}, ${spread}: decisions/s via limiter.consume`,
        `≥ ${min / 1e6} M/s`,
        `${(r.perSec / 1e6).toFixed(2)} M/s overall, ${(r.fastest / 1e6).toFixed(2)} M/s fastest batch (${f2(r.vsRlf)}× and ${f2(r.fastestVsRlf)}× rate-limiter-flexible)`,
        r.perSec >= min,
      );
    }
  }
}
if (results.memory) {
  for (const a of ['fixed-window', 'sliding-window', 'token-bucket', 'leaky-bucket meter', 'leaky-bucket queue']) {
    target(`${a}: heap bytes per key at ${cfg.keys.toLocaleString('en')} keys`, '≤ 100', mem[a].heap.toFixed(1), mem[a].heap <= 100);
  }
}
if (results.redis) {
  const one = red['tollgate RedisStore, 1 rule|64'];
  target('Redis, 1 rule, 64 in flight: share of bare EVALSHA', '≥ 90%', `${(one.ofCeiling * 100).toFixed(0)}%`, one.ofCeiling >= 0.9);
  const three = red['tollgate RedisStore, 3-rule stack|64'];
  target(
    'Redis, three-rule stack, 64 in flight: share of bare EVALSHA',
    '≥ 70%',
    `${(three.ofCeiling * 100).toFixed(0)}%`,
    three.ofCeiling >= 0.7,
  );
  // One script run carries a whole stack, and stacks asked for in the same tick share one
  // (RedisStore batching), so a decision costs at most one round trip whatever its rules.
  const four = red['tollgate RedisStore, 4-rule stack|64'];
  target('Redis, four-rule stack: commands per decision', '≤ 1 (one round trip)', four.commands.toFixed(3), four.commands <= 1.0005);
  const deny = red['tollgate RedisStore, 1 rule, every request refused|64'];
  target('Redis, refused key (deny cache): commands per decision', '0', deny.commands.toFixed(3), deny.commands < 0.005);
}
const targetTable = [
  '| target | goal | measured (median) | met |',
  '| --- | --- | --- | :---: |',
  ...targets.map((t) => `| ${t.what} | ${t.goal} | ${t.measured} | ${t.met ? 'yes' : '**no**'} |`),
].join('\n');

const command = `node test/bench/run.mjs ${process.argv.slice(2).join(' ')}`.trim();
console.log(`\n${targetTable}\n`);
if (results.http) console.log(`${httpTable(results.http)}\n`);
log(
  `done in ${Math.round(elapsed)} s (${Object.entries(timings)
    .map(([k, v]) => `${k} ${Math.round(v)} s`)
    .join(', ')})`,
);

if (out !== undefined) {
  const previous = existsSync(out) ? readFileSync(out, 'utf8') : existsSync(docPath) ? readFileSync(docPath, 'utf8') : '';
  const kept = previous.includes(KEEP) ? previous.slice(previous.indexOf(KEEP) + KEEP.length).replace(/^\n+/, '') : '';
  // The page's hand-written head (what the figures mean, the figures of record) stays first.
  const head = previous.includes(GENERATED) ? previous.slice(0, previous.indexOf(GENERATED)).trimEnd() : '# Benchmarks';
  const doc = [
    head,
    '',
    GENERATED,
    '',
    '## Throughput on one machine (`pnpm bench`)',
    '',
    `Generated by \`pnpm bench\` on ${started.toISOString()}: what tollgate costs against the bare frameworks and the peers, all`,
    'measured in one invocation so the machine is the same for every figure. Ratios are taken',
    'within one round (variants back to back); each figure is the median of the rounds, with its',
    'spread (± half the range, relative to the median) or its range in brackets.',
    '',
    '### This run',
    '',
    `- Command: \`pnpm bench\` (\`pnpm build && ${command}\`), ${runs} interleaved run(s) of everything, ${Math.round(elapsed / 60)} min in all.`,
    `- Machine: \`nproc\` ${host.nproc}, ${host.model}; Node ${host.node}; load average ${host.load.join(' / ')} (1/5/15 min) at start, ${loadEnd.join(' / ')} at the end.`,
    `- Versions: ${Object.entries(versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    `- HTTP: each server in its own process on 127.0.0.1, autocannon ${cfg.connections} connections, 1 s warm-up then ${cfg.duration} s; server CPU per request from the server's own \`process.cpuUsage()\`.`,
    `- In-process: \`await limiter.consume(req)\` on a MemoryStore in a fresh process per algorithm, batches of 10 000 for ${cfg.time} ms after 300 ms warm-up; limits high enough that the admit path (which writes) is measured. Each run gives its overall rate and its fastest batch (the one least disturbed by other work on the machine).`,
    `- Redis: a private redis-server on a free port, ioredis with auto-pipelining, ${cfg.redisTime} ms per workload and concurrency.`,
    '',
  ];
  if (results.http) doc.push('### HTTP', '', httpTable(results.http), '');
  if (results.inprocess) doc.push('### In-process decisions per second', '', inProcessTable(results.inprocess), '');
  if (results.memory) doc.push('### Memory per key', '', memoryTable(results.memory, cfg.keys), '');
  if (results.redis) doc.push('### Redis', '', redisTable(results.redis), '');
  if (results.adapters) {
    doc.push(
      '### The adapters alone, in process',
      '',
      'The plugin or middleware called directly on a request and response, without sockets or a load generator (test/bench/fastify-hook.bench.mjs, test/bench/express-middleware.bench.mjs; see their sections in [benchmarks-history.md](benchmarks-history.md#express)).',
      '',
      results.adapters.fastify,
      '',
    );
    if (results.adapters.express) doc.push(results.adapters.express, '');
  }
  doc.push(KEEP, '', kept);
  writeFileSync(out, `${doc.join('\n').trimEnd()}\n`);
  log(`wrote ${out}`);
}
