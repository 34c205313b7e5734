// Where the instructions of one `await limiter.consume(req)` go, function by function
// (docs/benchmarks-history.md, "A stack's per-rule work"): runs one variant of consume.callgrind.mjs under
// callgrind twice, as that script does (after the warm-up, with no further call and with
// `--calls` more), names V8's compiled JavaScript functions through node's
// `--perf-basic-prof` map (callgrind sees only their addresses), and prints the difference
// of the two runs per function, divided by `--calls`: the functions' own instructions per
// call (inlined functions count in the function they were inlined into).
//
//   pnpm build && node test/bench/consume.profile.mjs 'fixed-window, 4-rule stack' [--calls 40000] [--top 40]
//
// The total matches consume.callgrind.mjs's figure for the variant to within a few
// instructions (the perf map costs a little at start-up only). Needs valgrind.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { callgrindArgs, floorIndex } from './util.mjs';

const HARNESS = fileURLToPath(new URL('./consume.callgrind.mjs', import.meta.url));

/** node's perf map (`start size name` per line), sorted, and a lookup by address. */
function perfMap(pid) {
  const file = `/tmp/perf-${pid}.map`;
  const rows = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, size, ...name] = line.split(' ');
      return [Number.parseInt(start, 16), Number.parseInt(size, 16), name.join(' ')];
    })
    .sort((a, b) => a[0] - b[0]);
  rmSync(file, { force: true });
  const starts = rows.map((row) => row[0]);
  return (addr) => {
    const found = rows[floorIndex(starts, addr)];
    return found !== undefined && addr < found[0] + found[1] ? found[2] : `0x${addr.toString(16)}`;
  };
}

/** Instructions per function of one run of `variant` with `calls` measured calls. */
function run(dir, variant, warmup, calls) {
  const out = join(dir, `cg-${calls}.out`);
  const r = spawnSync('valgrind', callgrindArgs(out, HARNESS, variant, warmup, calls, ['--perf-basic-prof']), {
    stdio: ['ignore', 'ignore', 'pipe'],
    maxBuffer: 64 << 20,
  });
  const err = r.stderr.toString();
  const pid = /==(\d+)==/.exec(err)?.[1];
  if (r.status !== 0 || pid === undefined) throw new Error(`valgrind failed for ${variant}:\n${err.slice(-2000)}`);
  const nameOf = perfMap(pid);
  const text = spawnSync('callgrind_annotate', ['--threshold=100', out], { maxBuffer: 256 << 20 }).stdout.toString();
  const by = new Map();
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$/.exec(line);
    if (!m || m[2].startsWith('PROGRAM')) continue;
    const jit = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]/.exec(m[2]);
    const name = jit
      ? nameOf(Number.parseInt(jit[1], 16))
      : m[2]
          .replace(/^\S*?:/, '')
          .replace(/\s*\[[^\]]*\]$/, '')
          .slice(0, 120);
    by.set(name, (by.get(name) ?? 0) + Number(m[1].replaceAll(',', '')));
  }
  return by;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    calls: { type: 'string', default: '40000' },
    warmup: { type: 'string', default: '40000' },
    top: { type: 'string', default: '40' },
  },
});
const variant = positionals[0];
if (variant === undefined) throw new Error("name a variant of consume.callgrind.mjs, e.g. 'fixed-window, 4-rule stack'");
const calls = Number(values.calls);
const dir = mkdtempSync(join(tmpdir(), 'tollgate-consume-profile-'));
try {
  const base = run(dir, variant, Number(values.warmup), 0);
  const more = run(dir, variant, Number(values.warmup), calls);
  const rows = [...new Set([...base.keys(), ...more.keys()])]
    .map((name) => [name, ((more.get(name) ?? 0) - (base.get(name) ?? 0)) / calls])
    .sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, v]) => sum + v, 0);
  console.log(`${variant}: ${Math.round(total)} instructions per await consume`);
  for (const [name, v] of rows.slice(0, Number(values.top)))
    if (Math.abs(v) >= 5) console.log(`${String(Math.round(v)).padStart(7)}  ${name}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
