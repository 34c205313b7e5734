// Which Lua lines the store's function library runs per decision (docs/benchmarks-history.md,
// "The straight run as its own closure"): redis-server's build does not name the Lua
// interpreter's work by Lua function, so callgrind cannot say which lines a change made dearer.
// This records a workload's FCALLs on a private redis-server (MONITOR), then replays them in
// standalone Lua 5.1 (Redis' Lua version; Debian's lua5.1) on the library's own code, with
// redis.call and struct stood in for (redis-lua-lines.lua), and counts the virtual machine's
// instructions per line, per function and the C calls, per decision. A count, not a time:
// compare two builds' lines; the stand-ins' own work is not counted.
//
//   pnpm build && node test/bench/redis-lua-lines.mjs [--rules 4] [--decisions 20] [--top 40]
//
// The workload: the first `--rules` rules of redis-script.callgrind.mjs's four-rule stack, one
// decision per call, on keys each decided once before (the entries exist, as in steady state).
// TOLLGATE_CORE / TOLLGATE_REDIS=/path/to/dist/index.mjs measure another build.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { startRedis } from './util.mjs';

const { values } = parseArgs({
  options: {
    rules: { type: 'string', default: '4' },
    decisions: { type: 'string', default: '20' },
    top: { type: 'string', default: '40' },
  },
});
const build = (env, rel) => (process.env[env] ? pathToFileURL(process.env[env]).href : new URL(rel, import.meta.url).href);
const core = await import(build('TOLLGATE_CORE', '../../packages/core/dist/index.mjs'));
const { RedisStore } = await import(build('TOLLGATE_REDIS', '../../packages/redis/dist/index.mjs'));

const HIGH = 1_000_000_000;
const RULES = [
  { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' },
  { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1h' },
  { name: 'global', key: () => 'all', algorithm: 'token-bucket', limit: HIGH, window: '1s' },
  { name: 'hour', key: (r) => r.ip, algorithm: 'fixed-window', limit: HIGH, window: '1h' },
].slice(0, Number(values.rules));
const N = Number(values.decisions);

const redis = await startRedis();
const client = redis.client({ enableAutoPipelining: false });
const monitor = redis.client({ enableAutoPipelining: false });
let code;
const calls = [];
try {
  const store = new RedisStore({ client, timeoutMs: 60_000 });
  const limiter = core.createLimiter({ rules: RULES, store, prefix: 'll' });
  const ip = (i) => `10.0.${i}.1`;
  for (let i = 0; i < N; i++) await limiter.consume({ ip: ip(i) });
  const feed = await monitor.monitor();
  feed.on('monitor', (_time, args) => {
    if (/^fcall$/i.test(args[0])) calls.push(args);
  });
  for (let i = 0; i < N; i++) await limiter.consume({ ip: ip(i) });
  // MONITOR's lines arrive after the replies: wait until every call is in.
  for (let t = 0; calls.length < N && t < 100; t++) await new Promise((r) => setTimeout(r, 20));
  feed.disconnect();
  const [library] = await client.call('FUNCTION', 'LIST', 'WITHCODE');
  code = library[library.indexOf('library_code') + 1];
} finally {
  client.disconnect();
  monitor.disconnect();
  await redis.stop();
}
if (calls.length !== N) throw new Error(`recorded ${calls.length} calls of ${N}`);

// MONITOR prints arguments as sdscatrepr does (\n, \xHH, ...); Lua gets them as decimal escapes.
const unrepr = (s) =>
  s.replace(/\\(x[0-9a-fA-F]{2}|[nrtab\\"])/g, (_, e) =>
    e[0] === 'x' ? String.fromCharCode(Number.parseInt(e.slice(1), 16)) : ({ n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' }[e] ?? e),
  );
const lua = (s) =>
  `"${[...unrepr(s)].map((ch) => (/[ -~]/.test(ch) && ch !== '"' && ch !== '\\' ? ch : `\\${String(ch.charCodeAt(0)).padStart(3, '0')}`)).join('')}"`;
const rows = calls.map((c) => {
  const n = Number(c[2]);
  return `{ {${c
    .slice(3, 3 + n)
    .map(lua)
    .join(', ')}}, {${c
    .slice(3 + n)
    .map(lua)
    .join(', ')}} }`;
});
const dir = mkdtempSync(join(tmpdir(), 'tollgate-lua-lines-'));
try {
  writeFileSync(join(dir, 'library.lua'), code);
  writeFileSync(join(dir, 'calls.lua'), `return {\n${rows.join(',\n')}\n}\n`);
  const profiler = fileURLToPath(new URL('./redis-lua-lines.lua', import.meta.url));
  console.log(`${RULES.length} rule(s), ${N} decisions, one per call`);
  console.log(execFileSync('lua5.1', [profiler, join(dir, 'library.lua'), join(dir, 'calls.lua'), values.top], { encoding: 'utf8' }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
