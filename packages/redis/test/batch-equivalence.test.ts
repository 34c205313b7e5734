/**
 * Batched script runs decide exactly as the same stacks one after the other (SPEC 6.1,
 * 6.3): stacks requested in one tick share one script run, which keeps the entries of
 * keys several stacks count under (shared tenant/global rules) in the script and writes
 * them once at its end. Every decision of such a batch must equal MemoryStore's decision
 * of the same requests in the same order, and no key may be left without a TTL.
 */
import { createLimiter, type Decision, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, type Connected } from '../../../test/setup/clients.js';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { addScriptsUser, loginFor, RUN_PATHS } from '../../../test/setup/redis-paths.js';

interface Req {
  k: string;
  n: number;
}
type Body = Omit<Rule<Req>, 'name' | 'key' | 'cost'>;

const bodyArb: fc.Arbitrary<Body> = fc
  .record({
    algorithm: fc.constantFrom('fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket', 'queue', 'sliding-buckets'),
    limit: fc.integer({ min: 1, max: 12 }),
    window: fc.constantFrom(1000, 997, 250, 60_000),
    burst: fc.integer({ min: 1, max: 12 }),
    countRejected: fc.boolean(),
    blockFor: fc.constantFrom(0, 0, 700),
  })
  .map(({ algorithm, limit, window, burst, countRejected, blockFor }) => {
    const body: Body = { limit, window };
    if (blockFor > 0) body.blockFor = blockFor;
    if (algorithm === 'queue') return { ...body, algorithm: 'leaky-bucket', mode: 'queue', queue: burst };
    if (countRejected) body.countRejected = true;
    if (algorithm === 'token-bucket' || algorithm === 'leaky-bucket') return { ...body, algorithm, burst };
    if (algorithm === 'sliding-buckets') {
      // Blocks: the largest divisor of the window up to `burst`.
      let buckets = burst;
      while (window % buckets !== 0) buckets--;
      return { ...body, algorithm, buckets };
    }
    return { ...body, algorithm };
  });

type Call = { peek: boolean; k: string; n: number };
const callArb: fc.Arbitrary<Call> = fc.record({
  peek: fc.boolean().map((p) => p && Math.random() < 0.3),
  k: fc.constantFrom('a', 'b', 'c'),
  n: fc.integer({ min: 0, max: 4 }),
});
/** A round: requests fired in one tick (one script run), then the clock moves. */
const roundArb = fc.record({ calls: fc.array(callArb, { minLength: 1, maxLength: 12 }), advance: fc.integer({ min: -200, max: 1500 }) });

let server: RedisServer;
/** The client under test: each describe block connects its own. */
let client: object;
let admin: Redis;
let run = 0;

beforeAll(async () => {
  server = await startRedis();
  await addScriptsUser(server.port);
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  admin.disconnect();
  await server.destroy();
});

async function scriptRuns(): Promise<number> {
  // FCALL where the server has functions, EVALSHA where it has not.
  let n = 0;
  for (const m of (await admin.info('commandstats')).matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+)/g)) n += Number(m[1]);
  return n;
}

/** Every client, on the function path and on the script path (see redis-paths.ts). */
const TARGETS: readonly { readonly name: string; connect(): Promise<Connected> }[] = CLIENTS.flatMap((kind) =>
  RUN_PATHS.map((path) => ({ name: `${kind.name}, ${path}`, connect: () => kind.standalone(server.port, loginFor(path)) })),
);

describe.each(TARGETS)('a batch decides as its stacks one after the other, on $name', ({ connect }) => {
  let c: Connected;
  beforeAll(async () => {
    c = await connect();
    client = c.client;
  });
  afterAll(() => c.close());

  it('random stacks sharing keys, fired in one tick, equal MemoryStore in order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(bodyArb, { minLength: 1, maxLength: 4 }),
        fc.array(roundArb, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }),
        async (bodies, rounds, start) => {
          const prefix = `be${run++}`;
          // Rule 0 counts per request key; the others under keys every stack shares.
          const rules: Rule<Req>[] = bodies.map((b, i) => ({
            ...b,
            name: `r${i}`,
            key: i === 0 ? (req: Req) => req.k : () => `shared${i % 2}`,
            cost: (req: Req) => req.n,
          }));
          const mClock = new ManualClock(start);
          const rClock = new ManualClock(start);
          const memory = createLimiter<Req>({
            rules,
            store: new MemoryStore({ clock: mClock, sweepIntervalMs: 0 }),
            clock: mClock,
            prefix,
          });
          const store = new RedisStore({ client, prefix: 'be:', timeoutMs: 5000, denyCache: false });
          const redis = createLimiter<Req>({ rules, store, clock: rClock, prefix });
          for (const { calls, advance } of rounds) {
            const before = await scriptRuns();
            const got = await Promise.all(calls.map((c) => (c.peek ? redis.peek(c) : redis.consume(c))));
            expect(await scriptRuns()).toBe(before + 1);
            const want: Decision[] = [];
            for (const c of calls) want.push(await (c.peek ? memory.peek(c) : memory.consume(c)));
            expect(got).toEqual(want);
            mClock.advance(advance);
            rClock.advance(advance);
          }
          await store.close();
        },
      ),
      { numRuns: Number(process.env.EQ_RUNS ?? 100) },
    );
    expect(await keysWithoutExpiry(admin, 'be:*')).toEqual([]);
  }, 60_000);
});

describe('bug: an entry read as expired came back when the supplied clock stepped back', () => {
  beforeAll(() => {
    client = admin;
  });
  it('is dropped when read, as MemoryStore drops it', async () => {
    const rules: Rule<Req>[] = [
      { name: 'r', key: (req: Req) => req.k, algorithm: 'fixed-window', limit: 1, window: 1000, cost: (req: Req) => req.n },
    ];
    const start = 1_899_999_999_982;
    const prefix = `drop${run++}`;
    const decide = async (store: MemoryStore | RedisStore, clock: ManualClock): Promise<Decision[]> => {
      const l = createLimiter<Req>({ rules, store, clock, prefix });
      const out = [await l.consume({ k: 'a', n: 1 })];
      clock.advance(18); // the window (and the entry) ended 0 ms ago: read as absent
      out.push(await l.peek({ k: 'a', n: 1 }));
      clock.advance(-1); // back inside the old window
      out.push(await l.consume({ k: 'a', n: 1 }));
      return out;
    };
    const mClock = new ManualClock(start);
    const want = await decide(new MemoryStore({ clock: mClock, sweepIntervalMs: 0 }), mClock);
    // MemoryStore dropped the entry when it read it expired: the last request is admitted.
    expect(want.map((d) => d.allowed)).toEqual([true, true, true]);
    const store = new RedisStore({ client, prefix: 'be:', timeoutMs: 5000, denyCache: false });
    expect(await decide(store, new ManualClock(start))).toEqual(want);
    await store.close();
  });
});
