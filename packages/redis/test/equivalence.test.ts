/**
 * The Lua mirrors decide exactly as the core (SPEC 6.1, STYLE "property-based tests":
 * memory store = Redis store on the same inputs). Random stacks of one to three rules of
 * every algorithm and option (burst, queue, countRejected, blockFor, dryRun, calendar
 * quotas, fractional leaky intervals) receive random consumes, peeks, refunds, resets and
 * clock moves (backwards too); every decision of `RedisStore` must equal `MemoryStore`'s,
 * on every client the store takes (ioredis, node-redis 5 and 6).
 */
import { createLimiter, type Decision, type Limiter, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import fc from 'fast-check';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, type Connected } from '../../../test/setup/clients.js';
import { keysWithoutExpiry, type RedisCluster, type RedisServer, startCluster, startRedis } from '../../../test/setup/redis.js';
import { addScriptsUser, loginFor, RUN_PATHS, scriptCalls } from '../../../test/setup/redis-paths.js';

interface Req {
  k: string;
  n: number;
}
type RuleBody = Omit<Rule<Req>, 'name' | 'key' | 'cost'>;

const ruleArb: fc.Arbitrary<RuleBody> = fc
  .record({
    kind: fc.constantFrom('fixed', 'fixed-first', 'day', 'month', 'log', 'window', 'token', 'meter', 'queue', 'buckets'),
    limit: fc.integer({ min: 1, max: 9 }),
    windowMs: fc.oneof(fc.integer({ min: 1, max: 3000 }), fc.constantFrom(1000, 997, 60_000)),
    extra: fc.integer({ min: 1, max: 9 }),
    countRejected: fc.boolean(),
    blockFor: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })),
    dryRun: fc.boolean(),
  })
  .map(({ kind, limit, windowMs, extra, countRejected, blockFor, dryRun }) => {
    const opts: RuleBody = {};
    if (countRejected && kind !== 'queue') opts.countRejected = true;
    if (blockFor > 0) opts.blockFor = blockFor;
    if (dryRun) opts.dryRun = true;
    const base = { ...opts, limit, window: windowMs };
    switch (kind) {
      case 'fixed':
        return { ...base, algorithm: 'fixed-window' as const };
      case 'fixed-first':
        return { ...base, algorithm: 'fixed-window' as const, align: 'first-request' as const };
      case 'day':
        return { ...opts, quota: limit, per: 'day' as const };
      case 'month':
        return { ...opts, quota: limit, per: 'month' as const };
      case 'log':
        return { ...base, algorithm: 'sliding-log' as const };
      case 'window':
        return { ...base, algorithm: 'sliding-window' as const };
      case 'token':
        return { ...base, algorithm: 'token-bucket' as const, burst: extra };
      case 'meter':
        return { ...base, algorithm: 'leaky-bucket' as const, burst: extra };
      case 'buckets':
        return { ...base, algorithm: 'sliding-buckets' as const, buckets: divisorUpTo(windowMs, extra) };
      default:
        return { ...base, algorithm: 'leaky-bucket' as const, mode: 'queue' as const, queue: extra };
    }
  });

/** The largest divisor of `w` that is at most `n` (sliding-buckets needs one). */
function divisorUpTo(w: number, n: number): number {
  let d = n;
  while (w % d !== 0) d--;
  return d;
}

type Action = { t: 'consume' | 'peek'; k: string; n: number } | { t: 'refund' } | { t: 'reset'; k: string } | { t: 'advance'; ms: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ t: fc.constant('consume' as const), k: fc.constantFrom('a', 'b'), n: fc.integer({ min: 0, max: 10 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('peek' as const), k: fc.constantFrom('a', 'b'), n: fc.integer({ min: 0, max: 10 }) }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('refund' as const) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('reset' as const), k: fc.constantFrom('a', 'b') }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('advance' as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: -300, max: 4000 }), fc.constantFrom(86_400_000, 2_678_400_000)),
    }),
  },
);

let server: RedisServer;
/** Inspects the keys (standalone and Cluster), whatever the client under test. */
let admin: Redis;
let clusterAdmin: Cluster;
/** The client under test: each describe block connects its own. */
let client: object;
let cluster: RedisCluster;
/** A store option for the Cluster: every key of a stack in one slot, as a stack in MemoryStore. */
let hashTag: ((rule: string, key: string) => string) | undefined;
let run = 0;

beforeAll(async () => {
  server = await startRedis();
  await addScriptsUser(server.port);
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
  cluster = await startCluster();
  for (const n of cluster.nodes) await addScriptsUser(n.port);
  clusterAdmin = new Cluster(cluster.startupNodes);
  await clusterAdmin.ping();
});

afterAll(async () => {
  // Each path ran as its name says: the scripts user never got the library.
  const calls = await scriptCalls(admin);
  expect(calls.fcall).toBeGreaterThan(0);
  expect(calls.evalsha).toBeGreaterThan(0);
  admin.disconnect();
  clusterAdmin.disconnect();
  await cluster.destroy();
  await server.destroy();
});

async function replay(bodies: RuleBody[], actions: Action[], start: number, denyCache: boolean): Promise<void> {
  const prefix = `eq${run++}`;
  const rules: Rule<Req>[] = bodies.map((b, i) => ({
    ...b,
    name: `r${i}`,
    // Rule 0 counts per request key, the others share one key: stacks span keys.
    key: i === 0 ? (req: Req) => req.k : () => 'shared',
    cost: (req: Req) => req.n,
  }));
  const mClock = new ManualClock(start);
  const rClock = new ManualClock(start);
  const memory = createLimiter<Req>({ rules, store: new MemoryStore({ clock: mClock, sweepIntervalMs: 0 }), clock: mClock, prefix });
  const store = new RedisStore({ client, prefix: 'eq:', timeoutMs: 5000, denyCache, ...(hashTag ? { hashTag } : {}) });
  const redis = createLimiter<Req>({ rules, store, clock: rClock, prefix });
  let lastM: Decision | undefined;
  let lastR: Decision | undefined;
  const step = async (l: Limiter<Req>, a: Action, last: Decision | undefined): Promise<Decision | undefined> => {
    if (a.t === 'consume') return l.consume({ k: a.k, n: a.n });
    if (a.t === 'peek') return l.peek({ k: a.k, n: a.n });
    if (a.t === 'refund' && last) await l.refund({ k: 'a', n: 0 }, last);
    if (a.t === 'reset') await l.reset({ k: a.k, n: 0 });
    return undefined;
  };
  for (const a of actions) {
    if (a.t === 'advance') {
      mClock.advance(a.ms);
      rClock.advance(a.ms);
      continue;
    }
    const m = await step(memory, a, lastM);
    const r = await step(redis, a, lastR);
    expect(r).toEqual(m);
    if (a.t === 'consume' && m?.allowed) {
      lastM = m;
      lastR = r;
    }
  }
  await store.close();
}

/** What runs: every client, on the function path and on the script path, standalone and on the Cluster. */
interface Target {
  readonly name: string;
  readonly where: 'standalone' | 'cluster';
  connect(): Promise<Connected>;
}
const TARGETS: readonly Target[] = CLIENTS.flatMap((kind) =>
  RUN_PATHS.flatMap((path): Target[] => [
    { name: `${kind.name}, ${path}, standalone`, where: 'standalone', connect: () => kind.standalone(server.port, loginFor(path)) },
    {
      name: `${kind.name}, ${path}, cluster`,
      where: 'cluster',
      connect: () =>
        kind.cluster(
          cluster.startupNodes.map((n) => n.port),
          loginFor(path),
        ),
    },
  ]),
);

describe.each(TARGETS)('RedisStore decides exactly as MemoryStore ($name)', ({ where, connect }) => {
  let c: Connected;
  beforeAll(async () => {
    c = await connect();
    client = c.client;
    hashTag = where === 'cluster' ? () => 'eq' : undefined;
  });
  afterAll(() => c.close());

  it('a long sliding log (hundreds of entries, the chunked encoding) with refunds', async () => {
    const actions: Action[] = [];
    for (let i = 0; i < 260; i++) {
      actions.push({ t: 'consume', k: 'a', n: 1 + (i % 3) }, { t: 'advance', ms: 7 });
      if (i % 17 === 0) actions.push({ t: 'refund' });
    }
    await replay([{ algorithm: 'sliding-log', limit: 400, window: 1500 }], actions, 1_700_000_000_000, false);
  });

  for (const denyCache of [false, true]) {
    it(`random stacks and actions, deny cache ${denyCache ? 'on' : 'off'}`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(ruleArb, { minLength: 1, maxLength: 3 }),
          fc.array(actionArb, { minLength: 1, maxLength: 40 }),
          fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }),
          (bodies, actions, start) => replay(bodies, actions, start, denyCache),
        ),
        { numRuns: Number(process.env.EQ_RUNS ?? (where === 'cluster' ? 40 : 120)) },
      );
      expect(await keysWithoutExpiry(where === 'cluster' ? clusterAdmin : admin, 'eq:*')).toEqual([]);
    }, 60_000);
  }
});
