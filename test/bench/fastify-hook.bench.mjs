// The Fastify plugins' own work per request, in process (docs/benchmarks-history.md, "Fastify"):
// tollgate's onRequest hook (one rule) beside @fastify/rate-limit's, each called on a real
// Fastify request and reply, so what is measured is the plugin alone (key, decision,
// headers, how it hands control back), without sockets, a load generator or the rest of
// Fastify — the figure the HTTP harness cannot resolve on a busy machine.
//
//   pnpm build && node test/bench/fastify-hook.bench.mjs [--calls 200000] [--rounds 9]
//
// Both plugins are registered on one app; a later onRoute hook takes the hook each of them
// attached to GET /. One real HTTP request (loopback) reaches a handler that, per round
// and in an order rotated from round to round, calls each hook `--calls` times on its own
// request and reply: tollgate's as Fastify calls a callback hook (it returns after calling
// `done`), @fastify/rate-limit's as Fastify calls an async hook (awaiting its promise).
// Between calls the state a hook leaves on the request and reply is cleared, and that
// clearing alone is timed as the baseline and subtracted. Limits are never reached (the
// admit path). Figures: CPU µs per call (process.cpuUsage), median over rounds, range.
import http from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '9' } } });
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const ALLOW = 1_000_000_000;

async function loadTollgate() {
  try {
    return await import('@tollgate/fastify');
  } catch {
    // Before `pnpm install` has linked the workspace package, use the built output directly.
    return import(new URL('../../packages/fastify/dist/index.mjs', import.meta.url).href);
  }
}

const Fastify = (await import('fastify')).default;
const tollgate = (await loadTollgate()).default;
const fastifyRateLimit = (await import('@fastify/rate-limit')).default;

const app = Fastify({ logger: false });
await app.register(tollgate, { rules: [{ name: 'ip', limit: ALLOW, window: '1m' }] });
await app.register(fastifyRateLimit, { max: ALLOW, timeWindow: 60_000 });
const hooks = {};
app.addHook('onRoute', (route) => {
  if (route.url !== '/' || route.method !== 'GET') return;
  const list = [route.onRequest ?? []].flat();
  hooks.tollgate = list.find((h) => h.name === 'tollgateHook');
  hooks.peer = list.find((h) => h !== hooks.tollgate);
});

const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const noop = () => {};
const ran = (req) => Object.getOwnPropertySymbols(req).filter((s) => String(s).includes('rateLimitRan'));

function clear(request, reply) {
  request.rateLimit = undefined;
  reply.removeHeader('ratelimit');
  reply.removeHeader('ratelimit-policy');
  reply.removeHeader('x-ratelimit-limit');
  reply.removeHeader('x-ratelimit-remaining');
  reply.removeHeader('x-ratelimit-reset');
}

const measure = {
  async baseline(request, reply, marks) {
    const t = cpu();
    for (let i = 0; i < calls; i++) {
      clear(request, reply);
      for (const s of marks) delete request[s];
      await undefined;
    }
    return (cpu() - t) / calls;
  },
  async tollgate(request, reply, marks) {
    const hook = hooks.tollgate;
    const t = cpu();
    for (let i = 0; i < calls; i++) {
      clear(request, reply);
      for (const s of marks) delete request[s];
      hook(request, reply, noop);
      await undefined;
    }
    return (cpu() - t) / calls;
  },
  async '@fastify/rate-limit'(request, reply, marks) {
    const hook = hooks.peer;
    const t = cpu();
    for (let i = 0; i < calls; i++) {
      clear(request, reply);
      for (const s of marks) delete request[s];
      await hook(request, reply);
    }
    return (cpu() - t) / calls;
  },
};

app.get('/', async (request, reply) => {
  if (!hooks.tollgate || !hooks.peer) throw new Error('hooks not found');
  // The peer marks a request it has seen with a symbol: the hook must be allowed to run again.
  const marks = ran(request);
  const names = Object.keys(measure);
  const results = Object.fromEntries(names.map((n) => [n, []]));
  for (const n of names) await measure[n](request, reply, marks); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < names.length; i++) {
      const n = names[(i + r) % names.length];
      results[n].push(await measure[n](request, reply, marks));
    }
  }
  return results;
});

await app.listen({ port: 0, host: '127.0.0.1' });
const body = await new Promise((resolve, reject) => {
  http
    .get({ host: '127.0.0.1', port: app.server.address().port, path: '/' }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve(JSON.parse(text)));
    })
    .on('error', reject);
});
await app.close();

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const f = (x) => x.toFixed(2);
const base = body.baseline;
console.log(`${calls} calls x ${rounds} rounds; baseline (clearing only) ${f(median(base))} µs/call\n`);
console.log('| hook | CPU µs per call, baseline subtracted: median | range |');
console.log('| --- | ---: | ---: |');
for (const n of ['tollgate', '@fastify/rate-limit']) {
  const net = body[n].map((x, i) => x - base[i]);
  console.log(`| ${n} | ${f(median(net))} | ${f(Math.min(...net))}–${f(Math.max(...net))} |`);
}
