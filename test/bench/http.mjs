// HTTP benchmark: each server variant in its own process, driven by autocannon on
// loopback for a bounded time; reports requests/s and the server's own CPU time per
// request, as medians of N runs, and ratios to the bare framework of the same run.
//
//   node test/bench/http.mjs [--duration 5] [--runs 3] [--connections 50] [--only <substring>] [--json out.json]
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { variants } from './http/variants.mjs';
import { median, spread, startRedis } from './util.mjs';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    runs: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    only: { type: 'string' },
    json: { type: 'string' },
  },
});
const duration = Number(values.duration);
const runs = Number(values.runs);
const connections = Number(values.connections);
const serverPath = fileURLToPath(new URL('./http/server.mjs', import.meta.url));

function start(name, redisPort) {
  const child = fork(serverPath, [name, String(redisPort)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
    child.once('message', (m) => resolve({ child, port: m.port }));
  });
}

const ask = (child) =>
  new Promise((resolve) => {
    child.once('message', (m) => resolve(m.cpu));
    child.send('cpu');
  });

const load = (port, seconds) =>
  new Promise((resolve, reject) => {
    autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration: seconds, pipelining: 1 }, (err, r) =>
      err ? reject(err) : resolve(r),
    );
  });

async function measure(name, redis) {
  const { child, port } = await start(name, redis.port);
  try {
    await load(port, 1); // warm-up: JIT and connections
    const cpu0 = await ask(child);
    const r = await load(port, duration);
    const cpu1 = await ask(child);
    const requests = r.requests.total;
    const non2xx = r.non2xx;
    return { rps: requests / duration, cpuUs: (cpu1 - cpu0) / requests, non2xx, errors: r.errors + r.timeouts };
  } finally {
    child.removeAllListeners('exit');
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
    await redis.flush();
  }
}

const names = Object.keys(variants).filter((n) => !values.only || n.includes(values.only));
const redis = await startRedis();
const samples = Object.fromEntries(names.map((n) => [n, []]));
try {
  // Interleave runs so that drift in the machine affects every variant alike.
  for (let i = 0; i < runs; i++) {
    for (const name of names) {
      const m = await measure(name, redis);
      samples[name].push(m);
      process.stderr.write(`run ${i + 1}/${runs} ${name}: ${Math.round(m.rps)} req/s, ${m.cpuUs.toFixed(1)} µs CPU/req\n`);
    }
  }
} finally {
  await redis.stop();
}

const rows = names.map((name) => {
  const xs = samples[name];
  const framework = name.split(' ')[0];
  const bare = samples[`${framework} bare`];
  const rps = median(xs.map((x) => x.rps));
  const cpu = median(xs.map((x) => x.cpuUs));
  return {
    name,
    rps,
    rpsSpread: spread(xs.map((x) => x.rps)),
    ratio: bare ? rps / median(bare.map((x) => x.rps)) : undefined,
    cpuUs: cpu,
    addedUs: bare ? cpu - median(bare.map((x) => x.cpuUs)) : undefined,
    non2xx: median(xs.map((x) => x.non2xx)),
    errors: xs.reduce((a, x) => a + x.errors, 0),
  };
});

const fmt = (x, d = 2) => (x === undefined ? '—' : x.toFixed(d));
console.log('| server | req/s (median) | spread | ratio to bare | server CPU µs/req | added µs/req | non-2xx |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) {
  console.log(
    `| ${r.name} | ${Math.round(r.rps)} | ±${(r.rpsSpread * 100).toFixed(1)}% | ${fmt(r.ratio)} | ${fmt(r.cpuUs, 1)} | ${fmt(r.addedUs, 1)} | ${Math.round(r.non2xx)} |`,
  );
}
if (values.json) writeFileSync(values.json, JSON.stringify({ duration, runs, connections, rows }, null, 2));
