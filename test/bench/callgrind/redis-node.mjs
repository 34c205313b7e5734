// Node instructions per decision of RedisStore in process (docs/benchmarks-history.md, "The
// one-op call"), counted by valgrind's callgrind in the Node process: one
// `await limiter.consume()` at a time against a native redis-server, the path of a request
// alone in its tick (batching, deadline, reply decoding), without HTTP, for one rule and
// for four (the HTTP benchmark's rules). Instruction counts do not depend on the load.
//
//   pnpm build && node test/bench/callgrind/redis-node.mjs [--warmup 4000] [--decisions 2000] [--batches 2]
//       [--rules 1] [--keep <dir>]
//
// Starts its own redis-server (not under valgrind) and, per rule count, a Node process
// under callgrind with instrumentation off; after `warmup` decisions (JIT, every key
// written) the child waits on stdin while instrumentation is switched on, decides
// `decisions` times per batch, and the dump's total is divided by that. Needs valgrind and
// callgrind_control.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { startRedis } from '../util.mjs';

if (process.argv[2] === 'child') {
  // `node redis-node.mjs child <redisPort> <rules> <warmup> <decisions> <batches>`
  const [port, nRules, warmup, decisions, batches] = process.argv.slice(3).map(Number);
  const { Redis } = await import('ioredis');
  const core = await import(new URL('../../../packages/core/dist/index.mjs', import.meta.url).href);
  const { RedisStore } = await import(new URL('../../../packages/redis/dist/index.mjs', import.meta.url).href);
  const client = new Redis({ port, host: '127.0.0.1', enableAutoPipelining: true });
  const store = new RedisStore({ client, timeoutMs: 600_000 });
  const HIGH = 1_000_000_000;
  const rules = [{ name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' }];
  if (nRules >= 4)
    rules.push(
      { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1h' },
      { name: 'global', key: () => 'all', limit: HIGH, window: '1h' },
      { name: 'endpoint', key: () => 'GET /', limit: HIGH, window: '1h' },
    );
  const limiter = core.createLimiter({ rules, store, prefix: `n${nRules}` });
  let i = 0;
  const run = async (n) => {
    for (let j = 0; j < n; j++, i++) {
      const d = await limiter.consume({ ip: `10.${(i >> 8) & 255}.${i & 255}.1` });
      if (!d.allowed) throw new Error('refused: the count is void');
    }
  };
  await run(warmup);
  const lines = process.stdin;
  lines.setEncoding('utf8');
  let b = 0;
  console.log('ready');
  lines.on('data', async () => {
    await run(decisions);
    console.log('done');
    if (++b === batches) {
      client.disconnect();
      process.exit(0);
    }
  });
} else {
  const { values } = parseArgs({
    options: {
      warmup: { type: 'string', default: '4000' },
      decisions: { type: 'string', default: '2000' },
      batches: { type: 'string', default: '2' },
      // Only these rule counts (1, 4).
      rules: { type: 'string', multiple: true },
      // Keeps the callgrind dumps in this directory (for callgrind_annotate by hand).
      keep: { type: 'string', default: '' },
    },
  });
  const run = promisify(execFile);
  const redis = await startRedis();
  const rows = [];
  try {
    for (const nRules of (values.rules ?? ['1', '4']).map(Number)) {
      const dir = mkdtempSync(join(tmpdir(), 'tollgate-cg-node-'));
      const out = join(dir, 'node.out');
      const child = spawn(
        'valgrind',
        [
          '-q',
          '--tool=callgrind',
          '--instr-atstart=no',
          '--smc-check=all-non-file',
          `--callgrind-out-file=${out}`,
          'node',
          '--single-threaded',
          fileURLToPath(import.meta.url),
          'child',
          String(redis.port),
          String(nRules),
          values.warmup,
          values.decisions,
          values.batches,
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      const next = () =>
        new Promise((resolve, reject) => {
          const on = (d) => {
            if (/ready|done/.test(String(d))) {
              child.stdout.off('data', on);
              resolve();
            }
          };
          child.stdout.on('data', on);
          child.once('exit', (code) => reject(new Error(`child exited with ${code}`)));
        });
      await next();
      const per = [];
      for (let b = 1; b <= Number(values.batches); b++) {
        await run('callgrind_control', ['-i', 'on', String(child.pid)]);
        const done = next();
        child.stdin.write('go\n');
        await done;
        await run('callgrind_control', ['-d', String(child.pid)]);
        await run('callgrind_control', ['-i', 'off', String(child.pid)]);
        const file = `${out}.${b}`;
        const total = Number(/^totals:\s+(\d+)/m.exec(readFileSync(file, 'utf8'))?.[1] ?? Number.NaN);
        // V8's optimizing compiler, which runs on the main thread here (--single-threaded)
        // and is still at work after any warm-up short enough for valgrind: counted apart.
        const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 256 << 20 }).toString();
        const m = /([\d,]+) \([ \d.]+%\)\s+\S*:v8::internal::Runtime_CompileOptimized\(/.exec(text);
        const compiling = m ? Number(m[1].replace(/,/g, '')) : 0;
        per.push({ total: total / Number(values.decisions), compiling: compiling / Number(values.decisions) });
      }
      await new Promise((r) => child.once('exit', r));
      if (values.keep !== '') execFileSync('cp', ['-r', dir, values.keep]);
      rmSync(dir, { recursive: true, force: true });
      rows.push({ nRules, per });
    }
  } finally {
    await redis.stop();
  }
  console.log(
    `${values.batches} batches of ${values.decisions} decisions after ${values.warmup}; Node instructions per decision, batches separated by /`,
  );
  console.log('');
  const k = (x) => `${(x / 1000).toFixed(1)}k`;
  console.log('| rules | Node instructions per decision | of which V8 compiling | the rest |');
  console.log('| ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    const col = (f) => r.per.map((x) => k(f(x))).join(' / ');
    console.log(`| ${r.nRules} | ${col((x) => x.total)} | ${col((x) => x.compiling)} | ${col((x) => x.total - x.compiling)} |`);
  }
}
