// Shared helpers for the benchmarks (docs/benchmarks.md): a private redis-server on a free
// loopback port, medians and spreads, the machine description, and the "run me directly"
// test that lets every bench module double as a command.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * node's flags for a child measured under callgrind (consume.callgrind.mjs and
 * consume.profile.mjs run the same child with them).
 */
export const CALLGRIND_NODE_FLAGS = [
  // One thread: no background compiler or GC thread adds work that varies.
  '--single-threaded',
  '--expose-gc',
  // Fixed seeds: the string hashes (so every Map's layout) and Math.random are the
  // same in every run.
  '--hash-seed=1',
  '--random-seed=1',
  // And a GC schedule that does not depend on time: without it V8 sizes the heap and
  // starts major collections from allocation rates per millisecond, which valgrind
  // and the machine's load change from run to run, and the same code measured
  // anywhere within ±2 500 instructions per call (docs/benchmarks.md). With it,
  // repeated runs give the same figure to the instruction.
  '--predictable-gc-schedule',
];

/**
 * valgrind's arguments for one run of consume.callgrind.mjs's child (`variant` after
 * `warmup` calls, then `calls` more) into `out`; `nodeFlags` go before the harness's own.
 */
export function callgrindArgs(out, harness, variant, warmup, calls, nodeFlags = []) {
  return [
    '--tool=callgrind',
    `--callgrind-out-file=${out}`,
    process.execPath,
    ...nodeFlags,
    ...CALLGRIND_NODE_FLAGS,
    harness,
    '--child',
    variant,
    '--warmup',
    String(warmup),
    '--calls',
    String(calls),
  ];
}

/**
 * Runs the bench module at `url` again as a child (with --expose-gc) with `args`, and
 * resolves with the JSON of the last line it prints: one measurement per fresh process.
 */
export function runChild(url, args) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--expose-gc', fileURLToPath(url), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
    });
    p.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`${args.join(' ')}: exit ${code}`)),
    );
  });
}

/** Whether the module at `url` is the script Node was started with. */
export const isMain = (url) => process.argv[1] !== undefined && pathToFileURL(process.argv[1]).href === url;

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts `redis-server` on a free loopback port; resolves once a fresh client gets PONG.
 * `client()` makes an auto-pipelining ioredis client for it; `flush()` empties it.
 */
export async function startRedis() {
  const { Redis } = await import('ioredis');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-redis-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    // A fresh probe per attempt: a client that failed to connect may keep a stale state.
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
  const admin = new Redis({ port, host: '127.0.0.1' });
  return {
    port,
    pid: proc.pid,
    client: (extra = {}) => new Redis({ port, host: '127.0.0.1', enableAutoPipelining: true, ...extra }),
    flush: () => admin.flushall(),
    async stop() {
      admin.disconnect();
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Spread as ± half the range, relative to the median. */
export function spread(xs) {
  const m = median(xs);
  return m === 0 ? 0 : (Math.max(...xs) - Math.min(...xs)) / 2 / m;
}

/** `±x.x%` for a list of samples. */
export const pm = (xs) => `±${(spread(xs) * 100).toFixed(1)}%`;

/** The machine a run happened on, and how busy it was when it started. */
export function machine() {
  const c = cpus();
  return {
    cpus: c.length,
    model: c[0]?.model?.trim() ?? 'unknown',
    node: process.version,
    load: loadavg().map((x) => x.toFixed(2)),
  };
}

/** The index of the last element of sorted `xs` that is <= `x` (-1 when none). */
export function floorIndex(xs, x) {
  let lo = 0;
  let hi = xs.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/**
 * redis-server under callgrind on a free loopback port, an ioredis client to it, and
 * `counted()`: the inclusive instructions of `processCommand` since the previous call
 * (`top` > 0 also prints that many of the costliest functions).
 */
export async function callgrindRedis({ top = 0, instrAtStart = true } = {}) {
  const { Redis } = await import('ioredis');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-callgrind-redis-'));
  const port = await freePort();
  const proc = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      // Off: counted from the warm-up's end only (instrumented from the start, the store's first
      // FUNCTION LOAD can outlast its one-second probe on a loaded machine).
      ...(instrAtStart ? [] : ['--instr-atstart=no']),
      `--callgrind-out-file=${join(dir, 'cg.out')}`,
      'redis-server',
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' },
  );
  let client;
  const deadline = Date.now() + 60_000;
  for (;;) {
    await new Promise((r) => setTimeout(r, 300));
    const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    c.on('error', () => {});
    const ok = await c.connect().then(
      () => c.ping(),
      () => undefined,
    );
    if (ok === 'PONG') {
      client = c;
      break;
    }
    c.disconnect();
    if (Date.now() > deadline) throw new Error('redis-server under valgrind did not start within 60 s');
  }

  /**
   * Inclusive instructions of processCommand since the previous call: callgrind_control
   * dumps the counts and zeroes them; the dump is then annotated.
   */
  let dumps = 0;
  function counted() {
    execFileSync('callgrind_control', ['-d', String(proc.pid)], { stdio: 'ignore' });
    dumps++;
    const file = join(dir, `cg.out.${dumps}`);
    const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 64 << 20 }).toString();
    const m = /([\d,]+) \([ \d.]+%\)\s+\S*:processCommand /.exec(text);
    if (top > 0) {
      const lines = text.split('\n').filter((l) => /^\s*[\d,]+ \(/.test(l));
      console.error(lines.slice(0, top).join('\n'));
    }
    return m ? Number(m[1].replace(/,/g, '')) : 0;
  }
  return { client, proc, dir, counted };
}
