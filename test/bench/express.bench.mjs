// Express hello-world throughput with one rate-limit rule, against the same app without
// it, beside express-rate-limit's ratio in the same run (docs/benchmarks.md, "Express").
//
//   pnpm build && node test/bench/express.bench.mjs [--duration 5] [--runs 3] [--connections 50]
//
// Each server runs in its own child process on 127.0.0.1; autocannon drives it for a
// bounded time after a one-second warm-up. A round measures every variant back to back
// (in an order rotated from round to round); ratios to the bare app are taken within a
// round, and the table shows their median over rounds with the range. Besides requests
// per second it reports the server's own CPU time per request (process.cpuUsage in the
// server), which is less disturbed than throughput when other work shares the machine.
// The limit is never reached: this measures the cost of deciding and writing headers,
// not of refusing.
import { fork } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const ALLOW = 1_000_000_000;

async function loadTollgate() {
  // TOLLGATE_EXPRESS=/path/to/dist/esm/index.js measures a private build (a shared checkout's
  // dist may be rebuilt by someone else in the middle of a run).
  if (process.env.TOLLGATE_EXPRESS) return import(pathToFileURL(process.env.TOLLGATE_EXPRESS).href);
  try {
    return await import('@tollgate/express');
  } catch {
    // Before `pnpm install` has linked the workspace package, use the built output directly.
    return import(new URL('../../packages/express/dist/esm/index.js', import.meta.url).href);
  }
}

const variants = {
  bare: async () => {},
  tollgate: async (app) => {
    const { rateLimit } = await loadTollgate();
    app.use(rateLimit({ rules: [{ name: 'ip', limit: ALLOW, window: '1m' }] }));
  },
  'express-rate-limit': async (app) => {
    const { rateLimit } = await import('express-rate-limit');
    app.use(rateLimit({ windowMs: 60_000, limit: ALLOW, standardHeaders: 'draft-8', legacyHeaders: false }));
  },
};

async function serve(name) {
  const express = (await import('express')).default;
  const app = express();
  app.disable('x-powered-by');
  await variants[name](app);
  app.get('/', (_req, res) => res.send('hello'));
  const server = app.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
  process.on('message', (m) => {
    if (m === 'cpu') {
      const u = process.cpuUsage();
      process.send({ cpu: u.user + u.system });
    } else if (m === 'stop') server.close(() => process.exit(0));
  });
}

async function main() {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '5' },
      runs: { type: 'string', default: '3' },
      connections: { type: 'string', default: '50' },
    },
  });
  const duration = Number(values.duration);
  const runs = Number(values.runs);
  const connections = Number(values.connections);
  const autocannon = (await import('autocannon')).default;
  const self = fileURLToPath(import.meta.url);

  const start = (name) => {
    const child = fork(self, ['serve', name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
      child.once('message', (m) => resolve({ child, port: m.port }));
    });
  };
  const load = (port, seconds) =>
    new Promise((resolve, reject) => {
      autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration: seconds }, (err, r) => (err ? reject(err) : resolve(r)));
    });

  const cpuOf = (child) =>
    new Promise((resolve) => {
      child.once('message', (m) => resolve(m.cpu));
      child.send('cpu');
    });

  const names = Object.keys(variants);
  const rounds = []; // rounds[i][name] = { rps, us }
  const load0 = loadavg()[0];
  for (let i = 0; i < runs; i++) {
    const round = {};
    // Rotate the order each round so that no variant always runs first (or last).
    const order = names.map((_, j) => names[(i + j) % names.length]);
    for (const name of order) {
      const { child, port } = await start(name);
      try {
        await load(port, 1);
        const cpu0 = await cpuOf(child);
        const r = await load(port, duration);
        const cpu1 = await cpuOf(child);
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        const rps = r.requests.total / duration;
        const us = (cpu1 - cpu0) / r.requests.total;
        round[name] = { rps, us };
        process.stderr.write(`run ${i + 1}/${runs} ${name}: ${Math.round(rps)} req/s, ${us.toFixed(1)} µs CPU/req\n`);
      } finally {
        child.removeAllListeners('exit');
        child.send('stop');
        await new Promise((r) => child.once('exit', r));
      }
    }
    rounds.push(round);
  }
  const load1 = loadavg()[0];
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const range = (xs) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
  const version = (await import('express/package.json', { with: { type: 'json' } })).default.version;
  console.log(
    `\nExpress ${version}, Node ${process.version}, ${cpus().length} CPUs, ${connections} connections, ${duration} s x ${runs} rounds; ` +
      `load average ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end\n`,
  );
  // Ratios are taken within each round (variants measured back to back), then the median
  // over rounds: far steadier than a ratio of medians when the machine's load drifts.
  console.log(
    '| variant | req/s (median) | throughput ratio to bare: median (min–max) | server CPU µs/req | CPU ratio to bare: median (min–max) |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: |');
  for (const name of names) {
    const rps = rounds.map((r) => r[name].rps);
    const us = rounds.map((r) => r[name].us);
    const tr = rounds.map((r) => r[name].rps / r.bare.rps);
    const cr = rounds.map((r) => r[name].us / r.bare.us);
    console.log(
      `| ${name} | ${Math.round(median(rps))} | ${median(tr).toFixed(3)} (${range(tr)}) | ${median(us).toFixed(1)} | ${median(cr).toFixed(3)} (${range(cr)}) |`,
    );
  }
}

if (process.argv[2] === 'serve') await serve(process.argv[3]);
else await main();
