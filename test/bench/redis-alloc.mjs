// Bytes the Node process allocates per RedisStore decision alone in its tick (docs/benchmarks.md,
// "Per HTTP request, Redis store"): `await limiter.consume()` one at a time against a
// private redis-server, ioredis with auto-pipelining, one rule or the four of the HTTP
// benchmark. After `warmup` decisions, V8's sampling heap profiler (every 256 bytes on
// average, objects a scavenge or a full GC collected included) records `decisions` more;
// prints the bytes per decision and the functions that allocated most. Allocation is what
// the scavenges a request pays for are proportional to, and it does not depend on the
// machine's load the way CPU time does (sampling moves it by a few per cent).
//
//   pnpm build && node test/bench/redis-alloc.mjs [--rules 1] [--warmup 20000] [--decisions 20000] [--top 15]
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { startRedis } from './util.mjs';

const { values } = parseArgs({
  options: {
    rules: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '20000' },
    decisions: { type: 'string', default: '20000' },
    top: { type: 'string', default: '15' },
  },
});
const N = Number(values.decisions);
const { Redis } = await import('ioredis');
const core = await import(new URL('../../packages/core/dist/index.mjs', import.meta.url).href);
const { RedisStore } = await import(new URL('../../packages/redis/dist/index.mjs', import.meta.url).href);

const redis = await startRedis();
const client = new Redis({ port: redis.port, host: '127.0.0.1', enableAutoPipelining: true });
const store = new RedisStore({ client, timeoutMs: 60_000 });
const HIGH = 1_000_000_000;
const rules = [{ name: 'ip', key: (r) => r.ip, limit: HIGH, window: '1h' }];
if (Number(values.rules) >= 4)
  rules.push(
    { name: 'tenant', key: () => 'tenant', limit: HIGH, window: '1h' },
    { name: 'global', key: () => 'all', limit: HIGH, window: '1h' },
    { name: 'endpoint', key: () => 'GET /', limit: HIGH, window: '1h' },
  );
const limiter = core.createLimiter({ rules, store });
const req = { ip: '10.0.0.1' };
const run = async (n) => {
  for (let i = 0; i < n; i++) if (!(await limiter.consume(req)).allowed) throw new Error('refused: the count is void');
};

try {
  await run(Number(values.warmup));
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await run(N);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  const byFunction = new Map();
  let total = 0;
  const walk = (node) => {
    const cf = node.callFrame;
    const where = `${cf.functionName || '(anonymous)'} ${cf.url.replace(/.*node_modules\//, '').replace(/.*packages\//, '')}:${cf.lineNumber}`;
    if (node.selfSize > 0) {
      byFunction.set(where, (byFunction.get(where) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    for (const c of node.children) walk(c);
  };
  walk(profile.head);
  console.log(`${values.rules} rule(s): ${Math.round(total / N)} bytes allocated per decision (${N} decisions after ${values.warmup})`);
  for (const [where, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`${String(Math.round(bytes / N)).padStart(7)}  ${where}`);
  }
} finally {
  client.disconnect();
  await redis.stop();
}
