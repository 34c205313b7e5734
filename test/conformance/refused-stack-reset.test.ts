/**
 * A rule that admits a request its stack refuses consumed nothing, so it reports the state
 * it was found in: its `resetMs` (the RateLimit header's `t`) is the one `get` reads for
 * the key afterwards, not the one the request would have left had it been counted. On
 * MemoryStore and on RedisStore (the suite's own redis-server and Cluster, supplied time),
 * for every algorithm; `remaining` was already right and is checked beside it.
 */
import { compileHeaders, createLimiter, ManualClock, MemoryStore, type Rule, type Store } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';

// On the hour: every window of these rules starts here.
const START = Date.UTC(2026, 0, 1, 10);
const headers = compileHeaders('draft-10');

type Req = { ip: string };
type RuleUnderTest = Omit<Rule<Req>, 'name' | 'key'>;

interface Case {
  title: string;
  rule: RuleUnderTest;
  /** When the refused request comes, after the first (admitted) one at START. */
  after: number;
  /** The admitting rule's resetMs after the first request, read at `after`. */
  resetMs: number;
}

// 10 per minute beside a rule allowing 1 per hour, so the second request is refused by the
// latter. In brackets, what the refused request would have left had it been counted.
const CASES: Case[] = [
  // 1 in the window of [START, START + 60 000): estimate 1 until the window's end + 1 ms (2: + 30 001).
  { title: 'sliding-window', rule: { algorithm: 'sliding-window', limit: 10, window: '1m' }, after: 1000, resetMs: 59_001 },
  // The entry at START leaves the window at START + 60 000 (a new one: at + 60 000).
  { title: 'sliding-log', rule: { algorithm: 'sliding-log', limit: 10, window: '1m' }, after: 1000, resetMs: 59_000 },
  // 9 + 1000/6000 tokens, full again in 5 s (8 + 1000/6000: 11 s).
  { title: 'token-bucket', rule: { algorithm: 'token-bucket', limit: 10, window: '1m' }, after: 1000, resetMs: 5000 },
  // The stored time is START + 6000 (counted: + 12 000).
  { title: 'leaky-bucket meter', rule: { algorithm: 'leaky-bucket', limit: 10, window: '1m' }, after: 1000, resetMs: 5000 },
  { title: 'leaky-bucket queue', rule: { algorithm: 'leaky-bucket', mode: 'queue', limit: 10, window: '1m' }, after: 1000, resetMs: 5000 },
  // The block at START (6 s wide) leaves the window at START + 60 000 (counted, the block at 6 s: + 66 000).
  { title: 'sliding-buckets', rule: { algorithm: 'sliding-buckets', limit: 10, window: '1m' }, after: 7000, resetMs: 53_000 },
  // A new window, empty: nothing to reset (counted: its end, 59 s).
  { title: 'fixed-window, its window empty', rule: { algorithm: 'fixed-window', limit: 10, window: '1m' }, after: 61_000, resetMs: 0 },
];

// The refusing rule plain, or writing its refusal (MemoryStore's general path, Lua's check_rule).
const REFUSERS: { title: string; refuser: Partial<Rule<Req>> }[] = [
  { title: 'a plain refusal', refuser: {} },
  { title: 'counting it', refuser: { countRejected: true } },
  { title: 'blocking for it', refuser: { blockFor: '1h' } },
];

function refusedStackSuite(name: string, makeStore: (clock: ManualClock, prefix: string) => Store): void {
  describe(`${name}: an admitting rule of a refused stack reports the resetMs of its unchanged state`, () => {
    let n = 0;
    async function setup(rule: RuleUnderTest, hourKey: (r: Req) => string, refuser: Partial<Rule<Req>> = {}) {
      const clock = new ManualClock(START);
      const store = makeStore(clock, `rsr${++n}:`);
      const rules: Rule<Req>[] = [
        { name: 'ip', key: (r) => r.ip, ...rule },
        { name: 'hour', key: hourKey, algorithm: 'fixed-window', limit: 1, window: '1h', ...refuser },
      ];
      return { clock, store, l: createLimiter({ rules, store, clock, prefix: `rsr${n}` }) };
    }

    for (const c of CASES) {
      it.each(REFUSERS)(`${c.title}: the second request, refused by another rule ($title)`, async ({ refuser }) => {
        const { clock, store, l } = await setup(c.rule, (r) => r.ip, refuser);
        const req = { ip: 'a' };
        expect((await l.consume(req)).allowed).toBe(true);
        clock.advance(c.after);
        const before = await l.get('ip', 'a');
        expect(before.resetMs).toBe(c.resetMs);
        const d = await l.consume(req);
        expect(d.allowed).toBe(false);
        expect(d.rules[1]?.allowed).toBe(false);
        const ip = d.rules[0];
        expect(ip?.allowed).toBe(true);
        expect(ip?.remaining).toBe(before.remaining);
        expect(ip?.resetMs).toBe(c.resetMs);
        expect(ip?.delayMs).toBe(0);
        // The header's item for the rule: r and t of that same state, t in whole seconds up.
        const rateLimit = headers?.(d.rules, clock.now()).find((h) => h.name === 'RateLimit')?.value;
        expect(rateLimit).toContain(`"ip";r=${before.remaining};t=${Math.ceil(c.resetMs / 1000)}`);
        // A peek of the same stack agrees, and the state is as it was.
        expect((await l.peek(req)).rules[0]?.resetMs).toBe(c.resetMs);
        // Every figure as it was (on a Cluster a refunded empty window may now exist, at zero).
        const { exists: _after, ...after } = await l.get('ip', 'a');
        const { exists: _before, ...was } = before;
        expect(after).toEqual(was);
        await store.close();
      });

      it(`${c.title}: a key's first request, refused by a shared rule, leaves it with a full budget to report`, async () => {
        const { clock, store, l } = await setup(c.rule, () => 'all');
        expect((await l.consume({ ip: 'a' })).allowed).toBe(true);
        clock.advance(c.after);
        const d = await l.consume({ ip: 'b' });
        expect(d.allowed).toBe(false);
        expect(d.rules[0]).toMatchObject({ allowed: true, remaining: 10, resetMs: 0, delayMs: 0 });
        // Nothing stored (on a Cluster the slot that admitted was refunded to no state).
        expect(await l.get('ip', 'b')).toMatchObject({ remaining: 10, resetMs: 0, exists: false });
        await store.close();
      });
    }

    it('a first-request window is not opened by a request its stack refused: the next admitted request opens it', async () => {
      const { clock, store, l } = await setup({ algorithm: 'fixed-window', align: 'first-request', limit: 10, window: '1m' }, () => 'all');
      expect((await l.consume({ ip: 'a' })).allowed).toBe(true);
      clock.advance(1000);
      expect((await l.consume({ ip: 'b' })).allowed).toBe(false);
      await l.reset('hour', 'all');
      clock.advance(20_000);
      const d = await l.consume({ ip: 'b' });
      expect(d.allowed).toBe(true);
      expect(d.rules[0]).toMatchObject({ remaining: 9, resetMs: 60_000 });
      await store.close();
    });
  });
}

refusedStackSuite('MemoryStore', (clock) => new MemoryStore({ clock, sweepIntervalMs: 0 }));

describe('RedisStore', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ port: server.port, host: '127.0.0.1' });
  });
  afterAll(async () => {
    client.disconnect();
    await server.destroy();
  });
  // Batched (one script run for the tick's stacks) and one stack per run: both the Lua stack decision.
  refusedStackSuite('RedisStore', (clock, prefix) => new RedisStore({ client, clock, prefix, timeoutMs: 5000 }));
  refusedStackSuite(
    'RedisStore, batch: false',
    (clock, prefix) => new RedisStore({ client, clock, prefix: `nb${prefix}`, batch: false, timeoutMs: 5000 }),
  );
});

describe('RedisStore on a Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startCluster();
    client = new Cluster(cluster.startupNodes);
    await client.ping();
  });
  afterAll(async () => {
    client.disconnect();
    await cluster.destroy();
  });
  // Each rule in a slot of its own: the stack is decided slot by slot, and a slot that
  // admitted is refunded when another refused (reserve-then-refund).
  refusedStackSuite(
    'RedisStore, Cluster, a slot per rule',
    (clock, prefix) => new RedisStore({ client, clock, prefix, timeoutMs: 5000, hashTag: (rule) => rule }),
  );
});
