/**
 * The Lua mirrors decide exactly as the core (SPEC 6.1, STYLE "property-based tests":
 * memory store = Redis store on the same inputs). Random stacks of one to three rules of
 * every algorithm and option (burst, queue, countRejected, blockFor, dryRun, calendar
 * quotas, fractional leaky intervals) receive random consumes, peeks, refunds, resets and
 * clock moves (backwards too); every decision of `RedisStore` must equal `MemoryStore`'s.
 */
import { createLimiter, type Decision, type Limiter, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import fc from 'fast-check';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysWithoutExpiry, type RedisCluster, type RedisServer, startCluster, startRedis } from '../../../test/setup/redis.js';
import { addScriptsUser, loginFor, RUN_PATHS, type RunPath, scriptCalls } from '../../../test/setup/redis-paths.js';

interface Req {
  k: string;
  n: number;
}
type RuleBody = Omit<Rule<Req>, 'name' | 'key' | 'cost'>;

const ruleArb: fc.Arbitrary<RuleBody> = fc
  .record({
    kind: fc.constantFrom('fixed', 'fixed-first', 'day', 'month', 'log', 'window', 'token', 'meter', 'queue'),
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
      default:
        return { ...base, algorithm: 'leaky-bucket' as const, mode: 'queue' as const, queue: extra };
    }
  });

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
/** The client of the tests running: per run path, standalone or the Cluster. */
let client: Redis | Cluster;
let clients: Record<RunPath, Redis>;
let cluster: RedisCluster;
let clusterClients: Record<RunPath, Cluster>;
/** A store option for the Cluster: every key of a stack in one slot, as a stack in MemoryStore. */
let hashTag: ((rule: string, key: string) => string) | undefined;
let run = 0;

beforeAll(async () => {
  server = await startRedis();
  await addScriptsUser(server.port);
  clients = {
    functions: new Redis({ port: server.port, host: '127.0.0.1' }),
    scripts: new Redis({ port: server.port, host: '127.0.0.1', ...loginFor('scripts') }),
  };
  cluster = await startCluster();
  for (const n of cluster.nodes) await addScriptsUser(n.port);
  clusterClients = {
    functions: new Cluster(cluster.startupNodes),
    scripts: new Cluster(cluster.startupNodes, { redisOptions: loginFor('scripts') }),
  };
});

afterAll(async () => {
  // Each path ran as its name says: the scripts user never got the library.
  const calls = await scriptCalls(clients.functions);
  expect(calls.fcall).toBeGreaterThan(0);
  expect(calls.evalsha).toBeGreaterThan(0);
  for (const c of [...Object.values(clients), ...Object.values(clusterClients)]) c.disconnect();
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

describe.each(
  RUN_PATHS.flatMap((path) => [
    [path, 'standalone'],
    [path, 'cluster'],
  ]),
)('RedisStore decides exactly as MemoryStore (%s, %s)', (path, where) => {
  beforeAll(async () => {
    client = where === 'cluster' ? clusterClients[path as RunPath] : clients[path as RunPath];
    hashTag = where === 'cluster' ? () => 'eq' : undefined;
    await client.ping();
  });

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
      expect(await keysWithoutExpiry(client, 'eq:*')).toEqual([]);
    }, 60_000);
  }
});
