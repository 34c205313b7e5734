// HTTP benchmark (docs/benchmarks.md, "HTTP"): each server variant in its own process,
// driven by autocannon on loopback for a bounded time; reports requests/s and the server's
// own CPU time per request (process.cpuUsage in the server, so the load generator sharing
// the cores is not charged to it).
//
// A round measures every variant once, back to back, in an order rotated from round to
// round; ratios and CPU added are taken against the bare framework *within the round*, and
// the table shows their median over rounds with the range. That is far steadier than a
// ratio of medians when the machine's load drifts during a run.
//
//   node test/bench/http.mjs [--duration 4] [--runs 3] [--connections 50] [--only <substring>] [--json out.json]
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMain, median, pm, startRedis } from './util.mjs';

const serverPath = fileURLToPath(new URL('./http/server.mjs', import.meta.url));

/** Forks one server variant; resolves with the child and its port once it listens. */
export function start(name, redisPort, execArgv = []) {
  const child = fork(serverPath, [name, String(redisPort ?? '')], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
    child.once('message', (m) => resolve({ child, port: m.port }));
  });
}

/** The server process's own CPU time (user + system, µs); `child.lastT` gets its monotonic clock (µs). */
export const ask = (child) =>
  new Promise((resolve) => {
    child.once('message', (m) => {
      child.lastT = m.t;
      resolve(m.cpu);
    });
    child.send('cpu');
  });

/**
 * Runs the HTTP variants. `redis` is a running server from util.startRedis (one is started
 * when omitted and a variant needs it). Returns one row per variant.
 */
export async function runHttp({ duration = 4, runs = 3, connections = 50, only, redis, log = (s) => process.stderr.write(`${s}\n`) } = {}) {
  const autocannon = (await import('autocannon')).default;
  const { variants } = await import('./http/variants.mjs');
  const all = Object.keys(variants);
  const picked = all.filter((n) => !only || only.some((o) => n.includes(o)));
  // Every ratio needs its framework's bare server in the same round.
  const names = all.filter((n) => picked.includes(n) || (n.endsWith(' bare') && picked.some((p) => p.startsWith(n.split(' ')[0]))));
  const own = redis === undefined && names.some((n) => n.includes('redis')) ? await startRedis() : undefined;
  const r0 = redis ?? own;
  const load = (port, seconds) =>
    new Promise((resolve, reject) => {
      autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration: seconds, pipelining: 1 }, (err, r) =>
        err ? reject(err) : resolve(r),
      );
    });

  async function measure(name) {
    const { child, port } = await start(name, r0?.port);
    try {
      await load(port, 1); // warm-up: JIT and connections
      const cpu0 = await ask(child);
      const r = await load(port, duration);
      const cpu1 = await ask(child);
      const requests = r.requests.total;
      return { rps: requests / duration, cpuUs: (cpu1 - cpu0) / requests, refused: r.non2xx / requests, errors: r.errors + r.timeouts };
    } finally {
      child.removeAllListeners('exit');
      child.send('stop');
      await new Promise((r) => child.once('exit', r));
      await r0?.flush();
    }
  }

  const rounds = [];
  try {
    for (let i = 0; i < runs; i++) {
      const round = {};
      const order = names.map((_, j) => names[(i * 5 + j) % names.length]);
      for (const name of order) {
        const m = await measure(name);
        round[name] = m;
        log(`  http ${i + 1}/${runs} ${name}: ${Math.round(m.rps)} req/s, ${m.cpuUs.toFixed(1)} µs CPU/req`);
      }
      rounds.push(round);
    }
  } finally {
    await own?.stop();
  }

  return names.map((name) => {
    const framework = name.split(' ')[0];
    const bare = `${framework} bare`;
    const of = (f) => rounds.map((r) => f(r[name], r[bare]));
    const rps = of((x) => x.rps);
    const cpu = of((x) => x.cpuUs);
    const ratio = name === bare ? undefined : of((x, b) => x.rps / b.rps);
    const added = name === bare ? undefined : of((x, b) => x.cpuUs - b.cpuUs);
    return {
      name,
      rps: median(rps),
      rpsSpread: pm(rps),
      ratio: ratio && median(ratio),
      ratioRange: ratio && [Math.min(...ratio), Math.max(...ratio)],
      cpuUs: median(cpu),
      cpuSpread: pm(cpu),
      addedUs: added && median(added),
      addedRange: added && [Math.min(...added), Math.max(...added)],
      refused: median(of((x) => x.refused)),
      errors: rounds.reduce((a, r) => a + r[name].errors, 0),
    };
  });
}

const fmt = (x, d = 2) => (x === undefined ? '—' : x.toFixed(d));
const range = (r, d = 2) => (r === undefined ? '' : ` (${r[0].toFixed(d)}–${r[1].toFixed(d)})`);

/** The rows as a Markdown table. */
export function httpTable(rows) {
  const out = [
    '| server | req/s | spread | ratio to bare (range) | server CPU µs/req | CPU added µs/req (range) | refused |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.name} | ${Math.round(r.rps)} | ${r.rpsSpread} | ${fmt(r.ratio)}${range(r.ratioRange)} | ${fmt(r.cpuUs, 1)} | ${fmt(r.addedUs, 1)}${range(r.addedRange, 1)} | ${Math.round(r.refused * 100)}%${r.errors ? `, ${r.errors} errors` : ''} |`,
    );
  }
  return out.join('\n');
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '4' },
      runs: { type: 'string', default: '3' },
      connections: { type: 'string', default: '50' },
      only: { type: 'string', multiple: true },
      json: { type: 'string' },
    },
  });
  const rows = await runHttp({
    duration: Number(values.duration),
    runs: Number(values.runs),
    connections: Number(values.connections),
    only: values.only,
  });
  console.log(httpTable(rows));
  if (values.json) writeFileSync(values.json, JSON.stringify(rows, null, 2));
}
