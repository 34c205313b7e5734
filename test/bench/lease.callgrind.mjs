// Node-side instructions per `await limiter.consume(req)` with a leased RedisStore against
// MemoryStore (docs/benchmarks.md, "Leases"), counted by callgrind as consume.callgrind.mjs
// does: one key, one rule, far from its limit, so at steady state a decision is taken from
// the lease and one lease call in `max` reaches Redis (its Node side is counted, shared
// over the decisions; redis-server runs outside valgrind). Also counts the Redis calls per
// decision over the measured calls (INFO commandstats).
//
//   pnpm --filter @tollgate/core --filter @tollgate/redis build
//   node test/bench/lease.callgrind.mjs [--calls 40000] [--warmup 40000] [--only lease]
//
// Each variant runs twice under valgrind (node --single-threaded): after `--warmup` calls
// and a full GC, once with no further call and once with `--calls` more; the difference
// over `--calls` is one call's cost.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { callgrindArgs, startRedis } from './util.mjs';

const CORE = new URL('../../packages/core/dist/index.mjs', import.meta.url).href;
const REDIS = new URL('../../packages/redis/dist/index.mjs', import.meta.url).href;
const LIMIT = 1_000_000_000;
// An hour: no window turns over during a run (see consume.callgrind.mjs).
const WINDOW = '1h';
// A lease lives five minutes (no lease ends during a run under valgrind, which takes
// minutes) and takes 1000 units: a call every 1000 decisions.
const LEASE = { max: 1000, ttl: '5m' };

const rule = (algorithm) => ({ name: 'ip', key: (req) => req.k, limit: LIMIT, window: WINDOW, algorithm });

async function memory(algorithm) {
  const { createLimiter } = await import(CORE);
  const limiter = createLimiter({ rules: [rule(algorithm)] });
  return { consume: (req) => limiter.consume(req), close: async () => {} };
}

async function leased(algorithm) {
  const { createLimiter } = await import(CORE);
  const { RedisStore } = await import(REDIS);
  const { Redis } = await import('ioredis');
  const client = new Redis({ port: Number(process.env.LEASE_REDIS_PORT), host: '127.0.0.1' });
  const store = new RedisStore({ client, timeoutMs: 5000, lease: LEASE });
  const limiter = createLimiter({ rules: [rule(algorithm)], store });
  return {
    consume: (req) => limiter.consume(req),
    close: async () => {
      await store.close();
      client.disconnect();
    },
  };
}

const VARIANTS = {
  'MemoryStore, fixed-window': () => memory('fixed-window'),
  'RedisStore lease, fixed-window': () => leased('fixed-window'),
  'MemoryStore, token-bucket': () => memory('token-bucket'),
  'RedisStore lease, token-bucket': () => leased('token-bucket'),
};

async function drive(consume, req, n) {
  for (let i = 0; i < n; i++) await consume(req);
}

async function child(variant, warmup, calls) {
  const { consume, close } = await VARIANTS[variant]();
  const req = { k: '10.0.0.1' };
  await drive(consume, req, warmup);
  globalThis.gc?.();
  await drive(consume, req, calls);
  globalThis.gc?.();
  await close();
}

function total(variant, warmup, calls, port) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-callgrind-lease-'));
  const out = join(dir, 'cg.out');
  try {
    execFileSync('valgrind', callgrindArgs(out, fileURLToPath(import.meta.url), variant, warmup, calls), {
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, LEASE_REDIS_PORT: String(port) },
    });
    const m = /^totals:\s+(\d+)/m.exec(readFileSync(out, 'utf8'));
    if (!m) throw new Error(`no totals in the callgrind output of ${variant}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Store calls Redis ran (FCALL or EVALSHA). */
async function storeCalls(port) {
  const { Redis } = await import('ioredis');
  const admin = new Redis({ port, host: '127.0.0.1' });
  const info = await admin.info('commandstats');
  admin.disconnect();
  let c = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+)/g)) c += Number(m[1]);
  return c;
}

const { values } = parseArgs({
  options: {
    child: { type: 'string' },
    calls: { type: 'string', default: '40000' },
    warmup: { type: 'string', default: '40000' },
    only: { type: 'string' },
  },
});
const calls = Number(values.calls);
const warmup = Number(values.warmup);
if (values.child !== undefined) await child(values.child, warmup, calls);
else {
  const redis = await startRedis();
  try {
    const names = Object.keys(VARIANTS).filter((v) => values.only === undefined || v.includes(values.only));
    console.log(`| variant | instructions per await consume (warm-up ${warmup}, ${calls} calls) | Redis calls per decision |`);
    console.log('| --- | --- | --- |');
    for (const v of names) {
      await redis.flush();
      const base = total(v, warmup, 0, redis.port);
      const c0 = await storeCalls(redis.port);
      await redis.flush();
      const more = total(v, warmup, calls, redis.port);
      const c1 = await storeCalls(redis.port);
      // The run with more calls less the run without: the measured calls' share.
      const perDecision = v.startsWith('RedisStore') ? ((c1 - c0 - c0) / calls).toFixed(4) : '-';
      console.log(`| ${v} | ${Math.round((more - base) / calls)} | ${perDecision} |`);
    }
  } finally {
    await redis.stop();
  }
}
