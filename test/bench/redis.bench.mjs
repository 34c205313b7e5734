// Benchmark of @tollgate/redis (docs/benchmarks.md, "Redis"): decisions per second through
// RedisStore at 64 and at 1024 decisions in flight, for one rule, three- and four-rule stacks and
// one rule refusing every request (deny cache), beside rate-limiter-flexible's
// RateLimiterRedis.consume, rate-limit-redis' increment, and the ceiling: a bare EVALSHA of
// a trivial script from the same kind of ioredis client. Also counts the Redis commands
// each workload sends per decision (counted in the ioredis client), so "one round trip per decision,
// whatever the number of rules" and "no round trip for a refused key" are measured.
//
//   pnpm build && node test/bench/redis.bench.mjs [--time 2000] [--runs 3] [--inflight 64,1024]
//   pnpm build && node test/bench/redis.bench.mjs --leases [--time 2000] [--runs 5] [--inflight 64]
//
// --leases: RedisStore exact, RedisStore with `lease` and the two peers on 1, 100 and 10,000
// keys far from the limit, interleaved, each as a ratio to the exact store (runLeases).
//
// It imports the BUILT packages (dist/index.mjs) and starts its own redis-server on a free port.
// Every client is ioredis with enableAutoPipelining. Workloads run interleaved, --runs
// rounds of each; the figure is the median with its spread. Keys come from a pool of 10,000
// clients with limits high enough that every decision is an admission (the write path),
// except in the refusing workload.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { isMain, machine, median, pm, startRedis } from './util.mjs';

const KEYS = 10_000;
const keyOf = (i) => `10.${(i >> 8) & 255}.${i & 255}.1`;
const HIGH = 1_000_000_000;

/** CPU time (µs) the process `pid` has used so far, from /proc (Linux); undefined elsewhere. */
function cpuOf(pid) {
  try {
    // Fields after the command name: state, ppid, ..., utime (12th), stime (13th), in clock ticks.
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/**
 * Runs `op(i)` from `inflight` concurrent loops for `time` ms; returns operations per second
 * and the CPU time per operation of this process and of redis-server (`redisPid`).
 */
async function measure(op, time, inflight, redisPid) {
  let done = 0;
  const node0 = process.cpuUsage();
  const redis0 = cpuOf(redisPid);
  let next = 0;
  const end = performance.now() + time;
  const loop = async () => {
    while (performance.now() < end) {
      await op(next++ % KEYS);
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inflight }, loop));
  const node = process.cpuUsage(node0);
  const redis1 = cpuOf(redisPid);
  return {
    perSec: done / ((performance.now() - t0) / 1000),
    done,
    nodeCpu: (node.user + node.system) / done,
    redisCpu: redis0 === undefined || redis1 === undefined ? Number.NaN : (redis1 - redis0) / done,
  };
}

/**
 * ioredis clients for `server` (auto-pipelining) that count the commands they send, where
 * ioredis queues them (INFO commandstats would also count the commands a Lua script runs
 * inside Redis): `counter.sent`.
 */
function countingClients(server) {
  const clients = [];
  const counter = { sent: 0 };
  const client = () => {
    const c = server.client();
    const send = c.sendCommand.bind(c);
    c.sendCommand = (cmd, stream) => {
      counter.sent++;
      return send(cmd, stream);
    };
    clients.push(c);
    return c;
  };
  const close = () => {
    for (const c of clients) c.disconnect();
  };
  return { client, counter, close };
}

/**
 * Runs every workload at each concurrency in `inflight`, `runs` interleaved rounds.
 * `redis` is a running server from util.startRedis (one is started when omitted).
 */
export async function runRedis({ time = 2000, runs = 3, inflight = [64, 1024], redis, log = (s) => process.stderr.write(`${s}\n`) } = {}) {
  const server = redis ?? (await startRedis());
  const { client, counter, close } = countingClients(server);
  const core = await import(new URL('../../packages/core/dist/index.mjs', import.meta.url).href);
  const { RedisStore } = await import(new URL('../../packages/redis/dist/index.mjs', import.meta.url).href);
  const { RateLimiterRedis } = await import('rate-limiter-flexible');
  const { RedisStore: RateLimitRedisStore } = await import('rate-limit-redis');

  // Every tollgate decision must come from Redis (or, when refusing, from the deny cache
  // after Redis refused): a generous deadline, and any degraded decision voids the figures.
  let wrong = 0;
  const redisStore = () => new RedisStore({ client: client(), timeoutMs: 10_000 });
  const decide = (l, req, allowed) =>
    l.consume(req).then((d) => {
      if (d.degraded !== undefined || d.allowed !== allowed) wrong++;
    });
  const workloads = {};
  {
    const c = client();
    const sha = await c.script('LOAD', 'return 1');
    workloads['bare EVALSHA (ceiling)'] = (i) => c.evalsha(sha, 1, keyOf(i));
  }
  {
    const l = core.createLimiter({
      rules: [{ name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1m' }],
      store: redisStore(),
      prefix: 'b1',
    });
    workloads['tollgate RedisStore, 1 rule'] = (i) => decide(l, { ip: keyOf(i) }, true);
  }
  {
    // The stack: per client, per tenant, global.
    const rules = [
      { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1m' },
      { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1m' },
      { name: 'global', key: () => 'all', algorithm: 'token-bucket', limit: HIGH, window: '1s' },
    ];
    const l = core.createLimiter({ rules, store: redisStore(), prefix: 'b3' });
    workloads['tollgate RedisStore, 3-rule stack'] = (i) => decide(l, { ip: keyOf(i) }, true);
  }
  {
    const rules = [
      { name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1m' },
      { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1m' },
      { name: 'global', key: () => 'all', algorithm: 'token-bucket', limit: HIGH, window: '1s' },
      { name: 'endpoint', key: () => 'GET /', algorithm: 'sliding-window', limit: HIGH, window: '1h' },
    ];
    const l = core.createLimiter({ rules, store: redisStore(), prefix: 'b4' });
    workloads['tollgate RedisStore, 4-rule stack'] = (i) => decide(l, { ip: keyOf(i) }, true);
  }
  {
    // 1 per hour for the pool, spent here: each key's second decision is Redis' refusal,
    // and every later one within the hour comes from the deny cache.
    const l = core.createLimiter({ rules: [{ name: 'ip', key: (r) => r.ip, limit: 1, window: '1h' }], store: redisStore(), prefix: 'bx' });
    for (let i = 0; i < KEYS; i++) await l.consume({ ip: keyOf(i) });
    for (let i = 0; i < KEYS; i++) await l.consume({ ip: keyOf(i) });
    workloads['tollgate RedisStore, 1 rule, every request refused'] = (i) => decide(l, { ip: keyOf(i) }, false);
  }
  {
    const rl = new RateLimiterRedis({ storeClient: client(), points: HIGH, duration: 60, keyPrefix: 'rlf' });
    workloads['rate-limiter-flexible RateLimiterRedis.consume'] = (i) => rl.consume(keyOf(i));
  }
  {
    const c = client();
    const store = new RateLimitRedisStore({ sendCommand: (command, ...args) => c.call(command, ...args), prefix: 'rlr:' });
    store.init({ windowMs: 60_000 });
    workloads['rate-limit-redis increment'] = (i) => store.increment(keyOf(i));
  }

  const names = Object.keys(workloads);
  const results = {};
  const perDecision = {};
  try {
    for (const name of names) await measure(workloads[name], Math.min(time, 1000), 64); // warm-up: JIT, script caches, keys
    for (const name of names) {
      counter.sent = 0;
      const { done } = await measure(workloads[name], 300, 64);
      perDecision[name] = counter.sent / done;
    }
    for (let r = 0; r < runs; r++) {
      for (const n of inflight) {
        for (const name of names) {
          const m = await measure(workloads[name], time, n, server.pid);
          results[`${name}|${n}`] ??= [];
          results[`${name}|${n}`].push(m);
          log(
            `  redis ${r + 1}/${runs} ${n} in flight ${name}: ${Math.round(m.perSec)} /s, CPU µs per decision: Node ${m.nodeCpu.toFixed(2)}, redis-server ${m.redisCpu.toFixed(2)}`,
          );
        }
      }
    }
  } finally {
    close();
    if (redis === undefined) await server.stop();
  }
  if (wrong > 0) throw new Error(`${wrong} tollgate decisions were degraded or unexpected; the Redis figures are void`);
  const rows = [];
  for (const n of inflight) {
    const ceiling = median(results[`${names[0]}|${n}`].map((m) => m.perSec));
    for (const name of names) {
      const ms = results[`${name}|${n}`];
      const xs = ms.map((m) => m.perSec);
      rows.push({
        name,
        inflight: n,
        perSec: median(xs),
        pm: pm(xs),
        ofCeiling: median(xs) / ceiling,
        commands: perDecision[name],
        nodeCpu: median(ms.map((m) => m.nodeCpu)),
        redisCpu: median(ms.map((m) => m.redisCpu)),
      });
    }
  }
  return rows;
}

/**
 * Leases against exact decisions and the peers (docs/benchmarks.md, "Leases"): decisions per
 * second of a RedisStore deciding exactly, a RedisStore with `lease`, rate-limiter-flexible's
 * RateLimiterRedis.consume and rate-limit-redis' increment, one fixed-window rule far from
 * its limit, on 1, 100 and KEYS keys; `runs` interleaved rounds (A B C D A B C D ...) at
 * `inflight` decisions in flight, each figure also as a ratio to the exact store in its round.
 */
export async function runLeases({
  time = 2000,
  runs = 5,
  inflight = 64,
  lease = { max: 100, ttl: '1s' },
  redis,
  log = (s) => process.stderr.write(`${s}\n`),
} = {}) {
  const server = redis ?? (await startRedis());
  const { client, counter, close } = countingClients(server);
  const core = await import(new URL('../../packages/core/dist/index.mjs', import.meta.url).href);
  const { RedisStore } = await import(new URL('../../packages/redis/dist/index.mjs', import.meta.url).href);
  const { RateLimiterRedis } = await import('rate-limiter-flexible');
  const { RedisStore: RateLimitRedisStore } = await import('rate-limit-redis');
  const stores = [];
  // Every tollgate decision must be an admission decided by Redis or from a lease.
  let wrong = 0;
  const limiter = (prefix, options) => {
    const store = new RedisStore({ client: client(), timeoutMs: 10_000, ...options });
    stores.push(store);
    const rules = [{ name: 'ip', key: (r) => r.ip, algorithm: 'fixed-window', limit: HIGH, window: '1m' }];
    const l = core.createLimiter({ rules, store, prefix });
    return (ip) =>
      l.consume({ ip }).then((d) => {
        if (d.degraded !== undefined || !d.allowed) wrong++;
      });
  };
  // One key, a hundred busy keys, and KEYS keys each seen a few times a second.
  const shapes = { '1 key': () => keyOf(0), '100 keys': (i) => keyOf(i % 100), [`${KEYS.toLocaleString('en-US')} keys`]: keyOf };
  const workloads = {};
  for (const [shape, key] of Object.entries(shapes)) {
    const tag = shape.split(' ')[0].replace(',', '');
    const exact = limiter(`lx${tag}`, {});
    const leased = limiter(`ll${tag}`, { lease });
    const rl = new RateLimiterRedis({ storeClient: client(), points: HIGH, duration: 60, keyPrefix: `lrlf${tag}` });
    const c = client();
    const rlr = new RateLimitRedisStore({ sendCommand: (command, ...args) => c.call(command, ...args), prefix: `lrlr${tag}:` });
    rlr.init({ windowMs: 60_000 });
    workloads[shape] = {
      'tollgate RedisStore, exact': (i) => exact(key(i)),
      [`tollgate RedisStore, lease { max: ${lease.max}, ttl: '${lease.ttl}' }`]: (i) => leased(key(i)),
      'rate-limiter-flexible RateLimiterRedis.consume': (i) => rl.consume(key(i)),
      'rate-limit-redis increment': (i) => rlr.increment(key(i)),
    };
  }
  const results = {};
  const perDecision = {};
  try {
    for (const [shape, w] of Object.entries(workloads)) {
      for (const name of Object.keys(w)) await measure(w[name], Math.min(time, 1000), inflight); // warm-up: JIT, scripts, keys, leases
      for (const name of Object.keys(w)) {
        counter.sent = 0;
        const { done } = await measure(w[name], 500, inflight);
        perDecision[`${shape}|${name}`] = counter.sent / done;
      }
    }
    for (let r = 0; r < runs; r++) {
      for (const [shape, w] of Object.entries(workloads)) {
        for (const name of Object.keys(w)) {
          const m = await measure(w[name], time, inflight, server.pid);
          results[`${shape}|${name}`] ??= [];
          results[`${shape}|${name}`].push(m);
          log(`  leases ${r + 1}/${runs} ${shape} ${name}: ${Math.round(m.perSec)} /s`);
        }
      }
    }
  } finally {
    await Promise.all(stores.map((st) => st.close()));
    close();
    if (redis === undefined) await server.stop();
  }
  if (wrong > 0) throw new Error(`${wrong} tollgate decisions were degraded or refused; the figures are void`);
  const rows = [];
  for (const [shape, w] of Object.entries(workloads)) {
    const names = Object.keys(w);
    const exact = results[`${shape}|${names[0]}`];
    for (const name of names) {
      const ms = results[`${shape}|${name}`];
      const xs = ms.map((m) => m.perSec);
      const ratios = ms.map((m, k) => m.perSec / exact[k].perSec);
      rows.push({
        shape,
        name,
        perSec: median(xs),
        pm: pm(xs),
        ratio: median(ratios),
        ratioRange: [Math.min(...ratios), Math.max(...ratios)],
        commands: perDecision[`${shape}|${name}`],
        nodeCpu: median(ms.map((m) => m.nodeCpu)),
        redisCpu: median(ms.map((m) => m.redisCpu)),
      });
    }
  }
  return rows;
}

export function leasesTable(rows) {
  const out = [
    '| keys | workload | decisions/s | spread | ratio to exact (range) | Redis commands per decision | CPU µs per decision: Node | redis-server |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.shape} | ${r.name} | ${Math.round(r.perSec).toLocaleString('en-US')} | ${r.pm} | ${r.ratio.toFixed(2)} (${r.ratioRange[0].toFixed(2)}–${r.ratioRange[1].toFixed(2)}) | ${r.commands.toFixed(3)} | ${r.nodeCpu.toFixed(2)} | ${Number.isNaN(r.redisCpu) ? '—' : r.redisCpu.toFixed(2)} |`,
    );
  }
  return out.join('\n');
}

export function redisTable(rows) {
  const out = [
    '| workload | in flight | decisions/s | spread | of bare EVALSHA | Redis commands per decision | CPU µs per decision: Node | redis-server |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.name} | ${r.inflight} | ${Math.round(r.perSec).toLocaleString('en-US')} | ${r.pm} | ${(r.ofCeiling * 100).toFixed(0)}% | ${r.commands.toFixed(3)} | ${r.nodeCpu.toFixed(2)} | ${Number.isNaN(r.redisCpu) ? '—' : r.redisCpu.toFixed(2)} |`,
    );
  }
  return out.join('\n');
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      time: { type: 'string', default: '2000' },
      runs: { type: 'string' },
      inflight: { type: 'string' },
      leases: { type: 'boolean', default: false },
    },
  });
  if (values.leases) {
    const before = machine();
    const rows = await runLeases({ time: Number(values.time), runs: Number(values.runs ?? 5), inflight: Number(values.inflight ?? 64) });
    const after = machine();
    console.log(leasesTable(rows));
    console.log(
      `\n${before.cpus} CPUs (${before.model}), Node ${before.node}, load average ${before.load.join(' / ')} at start, ${after.load.join(' / ')} at the end`,
    );
    process.exit(0);
  }
  const rows = await runRedis({
    time: Number(values.time),
    runs: Number(values.runs ?? 3),
    inflight: (values.inflight ?? '64,1024').split(',').map(Number),
  });
  console.log(redisTable(rows));
  process.exit(0);
}
