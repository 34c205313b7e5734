// Where the instructions of one optimised function go, source line by source line
// (docs/benchmarks-history.md, "Kept rows, kept keys"): runs one variant of consume.callgrind.mjs under
// callgrind with instruction-level counts, asks node to print its optimised code
// (`--print-opt-code`, with each code object's table of source positions) and its perf map
// (`--perf-basic-prof`, to find the code object callgrind counted), and prints the
// instructions of the named function per call, attributed to the line of the bundle each
// machine instruction was compiled from (inlined functions count at their own lines).
//
//   pnpm build && node test/bench/consume.lines.mjs 'fixed-window, 4-rule stack' MemoryStore [--calls 20000]
//
// The function is named as the perf map names it (`JS:*<name> <file>:<line>:<col>`; the
// store's decision, a private method, is `MemoryStore` at the `#consume` line).
// One run, not two: the figures are the code object's instructions divided by all the
// calls, warm-up included, so they are per call once the function is optimised (a
// function optimised late is undercounted). Positions are read in the function's own
// file: a function inlined from another file would be shown at a wrong line, which does
// not happen in core's bundles (each entry point's chunk holds the code it inlines).
// Needs valgrind.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { callgrindArgs, floorIndex } from './util.mjs';

const HARNESS = fileURLToPath(new URL('./consume.callgrind.mjs', import.meta.url));

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    calls: { type: 'string', default: '20000' },
    warmup: { type: 'string', default: '40000' },
  },
});
const [variant, fn] = positionals;
if (variant === undefined || fn === undefined) throw new Error("usage: consume.lines.mjs '<variant>' <function name as in the perf map>");
const calls = Number(values.calls);
const warmup = Number(values.warmup);

/** A callgrind position: absolute (0x...), relative (+n, -n), or the same (*). */
function position(token, previous) {
  if (token.startsWith('0x')) return Number.parseInt(token, 16);
  if (token[0] === '+') return previous + Number(token.slice(1));
  if (token[0] === '-') return previous - Number(token.slice(1));
  return token === '*' ? previous : Number(token);
}

/** Self instructions per address in [lo, hi) of a callgrind output written with --dump-instr=yes. */
function costsIn(file, lo, hi) {
  const costs = new Map();
  let at = 0;
  let callCost = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const c = line.charCodeAt(0);
    const isPosition = (c >= 48 && c <= 57) || line[0] === '+' || line[0] === '-' || line[0] === '*';
    if (!isPosition) {
      // The line after `calls=` is the call's inclusive cost, not the caller's own.
      if (line.startsWith('calls=')) callCost = true;
      continue;
    }
    const [pos, , ir] = line.split(' ');
    at = position(pos, at);
    if (callCost) {
      callCost = false;
      continue;
    }
    if (ir !== undefined && at >= lo && at < hi) costs.set(at, (costs.get(at) ?? 0) + Number(ir));
  }
  return costs;
}

/** The code object of `fn` (optimised, `JS:*`) in node's perf map: start, size and file. */
function codeOf(pid) {
  const file = `/tmp/perf-${pid}.map`;
  const rows = readFileSync(file, 'utf8').split('\n');
  rmSync(file, { force: true });
  const found = [];
  for (const row of rows) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) JS:\*(\S*) (file:\/\/\S+):\d+:\d+$/.exec(row);
    if (m && m[3] === fn) found.push({ start: Number.parseInt(m[1], 16), size: Number.parseInt(m[2], 16), file: fileURLToPath(m[4]) });
  }
  if (found.length === 0) throw new Error(`no optimised code for ${fn} in the perf map`);
  return found;
}

/** The source positions table (pc offset → position) of the printed code object starting at `start`. */
function positionsOf(printed, start) {
  const at = printed.indexOf(`\n0x${start.toString(16)} `);
  if (at < 0) return undefined;
  const table = printed.indexOf('Source positions:', at);
  const rows = printed.slice(table).split('\n').slice(2);
  const pcs = [];
  const positions = [];
  for (const row of rows) {
    const m = /^\s+([0-9a-f]+)\s+(\d+)/.exec(row);
    if (!m) break;
    pcs.push(Number.parseInt(m[1], 16));
    positions.push(Number(m[2]));
  }
  return { pcs, positions };
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-consume-lines-'));
try {
  const out = join(dir, 'cg.out');
  const args = callgrindArgs(out, HARNESS, variant, warmup, calls, ['--perf-basic-prof', '--print-opt-code']);
  const r = spawnSync('valgrind', ['--dump-instr=yes', ...args], { maxBuffer: 1 << 30 });
  const err = r.stderr.toString();
  const pid = /==(\d+)==/.exec(err)?.[1];
  if (r.status !== 0 || pid === undefined) throw new Error(`valgrind failed for ${variant}:\n${err.slice(-2000)}`);
  const printed = r.stdout.toString();
  // A function may have been optimised more than once: the code object that ran most.
  let best;
  for (const code of codeOf(pid)) {
    const costs = costsIn(out, code.start, code.start + code.size);
    const total = [...costs.values()].reduce((a, b) => a + b, 0);
    if (best === undefined || total > best.total) best = { ...code, costs, total };
  }
  const table = positionsOf(printed, best.start);
  if (table === undefined) throw new Error(`the printed code of ${fn} at 0x${best.start.toString(16)} was not found`);
  const source = readFileSync(best.file, 'utf8');
  const lineStarts = [0];
  for (let i = 0; i < source.length; i++) if (source.charCodeAt(i) === 10) lineStarts.push(i + 1);
  const byLine = new Map();
  for (const [address, ir] of best.costs) {
    const k = floorIndex(table.pcs, address - best.start);
    const line = floorIndex(lineStarts, k < 0 ? 0 : table.positions[k]) + 1;
    byLine.set(line, (byLine.get(line) ?? 0) + ir);
  }
  const n = warmup + calls;
  const lines = source.split('\n');
  console.log(`${variant}: ${fn} (${best.file}), ${Math.round(best.total / n)} instructions per call`);
  for (const [line, ir] of [...byLine].sort((a, b) => a[0] - b[0])) {
    const per = ir / n;
    if (per >= 0.5) console.log(`${per.toFixed(1).padStart(7)}  ${String(line).padStart(5)}  ${lines[line - 1].trim().slice(0, 100)}`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
