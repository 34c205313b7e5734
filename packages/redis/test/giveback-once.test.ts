/**
 * A give-back (refund, settle, a lease's unused units) is applied once per call, whatever
 * the client re-sends. ioredis re-sends the commands it had no reply to after a reconnect
 * (`autoResendUnfulfilledCommands`): when the connection drops after Redis ran a give-back
 * and before its reply arrived, Redis got it twice and counted one unit less than had been
 * admitted. Each test drops the connection (a proxy closed and listening again on its port)
 * once Redis has applied the give-back and while its reply is still held by the proxy, then
 * reads the count on a direct client. node-redis does not re-send; it runs the same test.
 * Then, with a client that sends every give-back call twice (what a re-send is), the
 * EVALSHA fallback and a Redis Cluster, where each slot's call has a mark of its own.
 */
import { createLimiter, type Limiter, ManualClock, type Rule, type StoreOp } from '@tollgate/core';
import { RedisStore, type RedisStoreOptions } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import * as redis5 from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayProxy } from '../../../test/reliability/helpers/delay-proxy.js';
import { keysWithoutExpiry, type RedisCluster, type RedisServer, startCluster, startRedis } from '../../../test/setup/redis.js';

let server: RedisServer;
let admin: Redis;
let n = 0;
const SLOW = 10_000;
const LIMIT = 100;
/** The proxy holds each chunk this long: time enough to see the give-back applied and drop its reply. */
const HOLD_MS = 800;

beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(admin, 'gb*')).toEqual([]);
  admin.disconnect();
  await server.destroy();
});

type Connect = (port: number) => Promise<{ client: object; close: () => Promise<void> }>;

const clients: [string, Connect][] = [
  [
    'ioredis',
    async (port) => {
      const client = new Redis({ port, host: '127.0.0.1' });
      client.on('error', () => {});
      await client.ping();
      return { client, close: async () => void client.disconnect() };
    },
  ],
  [
    'node-redis',
    async (port) => {
      const client = redis5.createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: () => 50 } });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => void client.destroy() };
    },
  ],
];

interface Setup {
  proxy: DelayProxy;
  /** Limiter on the store behind the proxy. */
  limiter: Limiter<unknown>;
  store: RedisStore;
  /** Limiter on a store with a direct client: what Redis counts. */
  plain: Limiter<unknown>;
  clock: ManualClock;
  done: () => Promise<void>;
}

async function setup(connect: Connect, lease?: RedisStoreOptions['lease']): Promise<Setup> {
  const proxy = new DelayProxy(server.port);
  const port = await proxy.listen();
  const { client, close } = await connect(port);
  const prefix = `gb${++n}:`;
  // Inside one clock-aligned hour: the fixed window stays the same.
  const clock = new ManualClock(3_600_000 * 600 + 1000);
  const store = new RedisStore({ client, prefix, timeoutMs: SLOW, ...(lease === undefined ? {} : { lease }) });
  store.on('error', () => {});
  const exact = new RedisStore({ client: admin, prefix, timeoutMs: SLOW });
  const rules: Rule<unknown>[] = [{ name: 'r', algorithm: 'fixed-window', limit: LIMIT, window: '1h', key: () => 'k' }];
  const limiter = createLimiter({ rules, store, clock });
  const plain = createLimiter({ rules, store: exact, clock });
  return {
    proxy,
    limiter,
    store,
    plain,
    clock,
    done: async () => {
      proxy.delayMs = 0;
      await store.close();
      await exact.close();
      await close();
      await proxy.close().catch(() => {});
    },
  };
}

/**
 * Runs `giveBack` with the proxy holding every chunk, waits until Redis counts `used`
 * (the give-back applied), drops the connection while the reply is held, and listens again
 * on the same port (a client that re-sends does so now); then awaits `giveBack`.
 */
async function dropAfterApplied(s: Setup, used: number, giveBack: () => Promise<unknown>): Promise<void> {
  s.proxy.delayMs = HOLD_MS;
  const pending = giveBack().catch(() => {});
  const deadline = Date.now() + SLOW;
  while ((await s.plain.get('r', 'k')).remaining !== LIMIT - used) {
    if (Date.now() > deadline) throw new Error('the give-back never reached Redis');
    await new Promise((r) => setTimeout(r, 10));
  }
  const port = s.proxy.port;
  await s.proxy.close();
  s.proxy.delayMs = 0;
  await s.proxy.listen(port);
  await pending;
}

describe.each(clients)('%s: a give-back whose reply was lost is applied once', (_, connect) => {
  it('a refund re-sent after a reconnect is applied once (Redis counted 29 where 30 were admitted)', async () => {
    const s = await setup(connect);
    try {
      let last = await s.limiter.consume({});
      for (let i = 1; i < 31; i++) last = await s.limiter.consume({});
      expect(last.allowed).toBe(true);
      await dropAfterApplied(s, 30, () => s.limiter.refund({}, last));
      expect((await s.plain.get('r', 'k')).remaining).toBe(LIMIT - 30);
    } finally {
      await s.done();
    }
  });

  it('a settle re-sent after a reconnect is applied once', async () => {
    const s = await setup(connect);
    try {
      for (let i = 0; i < 20; i++) await s.limiter.consume({});
      const res = await s.limiter.reserve({}, { cost: 10 });
      expect(res.allowed).toBe(true);
      await dropAfterApplied(s, 24, () => res.settle(4));
      expect((await s.plain.get('r', 'k')).remaining).toBe(LIMIT - 24);
    } finally {
      await s.done();
    }
  });

  it('settles batched with a decision: the re-sent call decides again, its settles are skipped', async () => {
    const s = await setup(connect);
    try {
      for (let i = 0; i < 20; i++) await s.limiter.consume({});
      const ops = s.limiter.resolve({}, 10) as StoreOp[];
      const a = await s.store.consume(ops, s.clock.now());
      const b = await s.store.consume(ops, s.clock.now());
      expect(a.allowed && b.allowed).toBe(true);
      // Two settles and a peek in one tick: one script run.
      let peeked: boolean | undefined;
      await dropAfterApplied(s, 20 + 4 + 3, () =>
        Promise.all([
          s.store.settle(
            ops.map((op) => ({ ...op, cost: -6 })),
            a.now,
            s.clock.now(),
          ),
          s.store.settle(
            ops.map((op) => ({ ...op, cost: -7 })),
            b.now,
            s.clock.now(),
          ),
          s.store.peek(s.limiter.resolve({}, 1) as StoreOp[], s.clock.now()).then((d) => {
            peeked = d.allowed;
          }),
        ]),
      );
      expect(peeked).toBe(true);
      expect((await s.plain.get('r', 'k')).remaining).toBe(LIMIT - 27);
    } finally {
      await s.done();
    }
  });

  it("a lease's units given back (limiter.get ends the lease) are given back once", async () => {
    const s = await setup(connect, { max: 10, ttl: '1m' });
    try {
      let admitted = 0;
      for (let i = 0; i < 30; i++) if ((await s.limiter.consume({})).allowed) admitted++;
      expect(admitted).toBe(30);
      expect(s.store.leased(s.limiter.rules[0]?.spec as never, 'k')).toBeGreaterThan(0);
      await dropAfterApplied(s, 30, () => s.limiter.get('r', 'k'));
      expect(s.store.leased(s.limiter.rules[0]?.spec as never, 'k')).toBe(0);
      expect((await s.plain.get('r', 'k')).remaining).toBe(LIMIT - 30);
    } finally {
      await s.done();
    }
  });
});

/**
 * `client` (ioredis, standalone or Cluster) sending each script call that gives back twice
 * in a row, as ioredis does when a reply is lost: the second reply is the one answered.
 */
/** A plan that gives back (lua/parse.lua): a refund or settle call, or a batched call with a settle run. */
const GIVES_BACK = /^[rs] \S+ \d+\n|\n\d+ [sS]\d+:/;

function resending<T extends object>(client: T): T {
  const doubled = new Set<string | symbol>(['fcallBuffer', 'evalshaBuffer', 'evalBuffer']);
  return new Proxy(client, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      if (!doubled.has(prop)) return v.bind(target);
      return async (...args: unknown[]) => {
        const first: unknown = await v.apply(target, args);
        if (!args.some((a) => typeof a === 'string' && GIVES_BACK.test(a))) return first;
        return v.apply(target, args);
      };
    },
  });
}

describe('a client that sends every give-back call twice', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startCluster();
    // FUNCTION refused (a managed service's ACL): the store runs its script with EVALSHA.
    await admin.call('ACL', 'SETUSER', 'gbnofunction', 'on', '>pw', '~*', '&*', '+@all', '-function');
  });
  afterAll(async () => {
    await cluster.destroy();
  });

  const rules: Rule<unknown>[] = [
    { name: 'a', algorithm: 'fixed-window', limit: LIMIT, window: '1h', key: () => 'k1' },
    { name: 'b', algorithm: 'sliding-window', limit: LIMIT, window: '1h', key: () => 'k2' },
  ];

  async function twiceSent(client: object, direct: object): Promise<void> {
    const prefix = `gb${++n}:`;
    const clock = new ManualClock(3_600_000 * 700 + 1000);
    const store = new RedisStore({ client: resending(client), prefix, timeoutMs: SLOW });
    const exact = new RedisStore({ client: direct, prefix, timeoutMs: SLOW });
    const limiter = createLimiter({ rules, store, clock });
    const plain = createLimiter({ rules, store: exact, clock });
    const errors: unknown[] = [];
    store.on('error', (e) => errors.push(e));
    try {
      let last = await limiter.consume({});
      for (let i = 1; i < 31; i++) last = await limiter.consume({});
      await limiter.refund({}, last);
      const res = await limiter.reserve({}, { cost: 10 });
      await res.settle(4);
      // Two settles in one tick (one batched call on a standalone server).
      const [r1, r2] = [await limiter.reserve({}, { cost: 5 }), await limiter.reserve({}, { cost: 5 })];
      await Promise.all([r1.settle(2), r2.settle(1)]);
      for (const name of ['a', 'b']) expect((await plain.get(name, name === 'a' ? 'k1' : 'k2')).remaining).toBe(LIMIT - 30 - 4 - 2 - 1);
      expect(errors).toEqual([]);
    } finally {
      await store.close();
      await exact.close();
    }
  }

  it('FCALL, standalone: each give-back applied once (they were applied twice)', async () => {
    const c = new Redis({ port: server.port, host: '127.0.0.1' });
    try {
      await twiceSent(c, admin);
    } finally {
      c.disconnect();
    }
  });

  it('the EVALSHA fallback: each give-back applied once', async () => {
    const c = new Redis({ port: server.port, host: '127.0.0.1', username: 'gbnofunction', password: 'pw' });
    const before = await admin.info('commandstats');
    try {
      await twiceSent(c, admin);
    } finally {
      c.disconnect();
    }
    const evalshas = (info: string) => Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0);
    expect(evalshas(await admin.info('commandstats'))).toBeGreaterThan(evalshas(before));
  });

  it('a Cluster, a stack across slots: each slot gives back once', async () => {
    const c = new Cluster(cluster.startupNodes);
    const direct = new Cluster(cluster.startupNodes);
    try {
      await twiceSent(c, direct);
    } finally {
      c.disconnect();
      direct.disconnect();
    }
  });
});
