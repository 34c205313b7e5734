/**
 * The store's code as a Redis function library (SPEC 6.3): loaded once per connection,
 * called with FCALL, reloaded when the server lost it (FUNCTION FLUSH, a restart), two
 * versions side by side, and the EVALSHA fallback where FUNCTION or FCALL is refused by an
 * ACL. Every check reads what the real server did (its libraries, its command counts).
 */
import { createLimiter, type Limiter } from '@tollgate/core';
import { RedisSlotStore, RedisStore, STORE_LIBRARY, STORE_LIBRARY_NAME } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, type Connected } from '../../../test/setup/clients.js';
import { type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { parseDecisions } from '../src/args.js';

let server: RedisServer;
let admin: Redis;
let n = 0;

beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  admin.disconnect();
  await server.destroy();
});

/**
 * Calls of each command the server ran without an error so far (INFO commandstats: calls
 * less failed_calls), e.g. `function|load`. An FCALL sent while the library is being
 * loaded, before it is there, fails and runs nothing.
 */
async function stats(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await admin.info('commandstats')).matchAll(/cmdstat_([a-z_|]+):calls=(\d+)[^\r\n]*?failed_calls=(\d+)/g))
    out[m[1] as string] = Number(m[2]) - Number(m[3]);
  return out;
}

function delta(before: Record<string, number>, after: Record<string, number>, cmd: string): number {
  return (after[cmd] ?? 0) - (before[cmd] ?? 0);
}

/**
 * A limiter of `limit` per minute on Redis time, its window opened by the key's first request:
 * a clock-aligned minute ending among the decisions would give a fresh budget (one more admitted).
 */
function limiter(client: object, limit = 3): { l: Limiter<unknown>; store: RedisStore; errors: unknown[] } {
  const store = new RedisStore({ client, prefix: 'fn:', timeoutMs: 5000, denyCache: false });
  const errors: unknown[] = [];
  store.on('error', (e) => errors.push(e));
  const rules = [{ name: 'r', key: () => 'k', limit, ...FROM_FIRST }];
  return { l: createLimiter({ rules, store, prefix: `fn${n++}` }), store, errors };
}

const FROM_FIRST = { window: '1m', algorithm: 'fixed-window', align: 'first-request' } as const;

async function admitted(l: Limiter<unknown>, count: number): Promise<number> {
  let yes = 0;
  for (let i = 0; i < count; i++) {
    const d = await l.consume({});
    expect(d.degraded).toBeUndefined();
    if (d.allowed) yes++;
  }
  return yes;
}

function connect(user?: string): Redis {
  return new Redis({ port: server.port, host: '127.0.0.1', ...(user ? { username: user, password: 'pw' } : {}) });
}

/** Resolves once the client (either family) is connected again. */
async function ready(client: object): Promise<void> {
  const c = client as { status?: string; isReady?: boolean };
  for (let i = 0; i < 400 && c.status !== 'ready' && c.isReady !== true; i++) await new Promise((r) => setTimeout(r, 25));
  expect(c.status === 'ready' || c.isReady === true).toBe(true);
}

describe('function library', () => {
  it('is named after a hash of its source and loaded once; every decision is one FCALL', async () => {
    expect(STORE_LIBRARY_NAME).toMatch(/^tollgate_[0-9a-f]{16}$/);
    expect(STORE_LIBRARY.startsWith(`#!lua name=${STORE_LIBRARY_NAME}\n`)).toBe(true);
    await admin.call('FUNCTION', 'FLUSH');
    const client = connect();
    const before = await stats();
    const { l } = limiter(client);
    expect(await admitted(l, 5)).toBe(3);
    await l.peek({});
    const after = await stats();
    expect(delta(before, after, 'fcall')).toBe(6);
    expect(delta(before, after, 'evalsha')).toBe(0);
    // Loaded once for the connection (one round trip), not asked per decision.
    expect(delta(before, after, 'function|list')).toBe(0);
    expect(delta(before, after, 'function|load')).toBe(1);
    // A second store on the same client asks nothing more.
    const again = limiter(client);
    expect(await admitted(again.l, 2)).toBe(2);
    const later = await stats();
    expect(delta(after, later, 'function|list') + delta(after, later, 'function|load')).toBe(0);
    expect(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)).toHaveLength(1);
    client.disconnect();
  });

  it('two versions side by side (a rolling deploy): each calls its own library, on the same counters', async () => {
    // Another build of the library: another name and other function names, as a changed
    // source gives. Loading it leaves this build's library in place.
    const OTHER = 'tollgate_0123456789abcdef';
    await admin.call('FUNCTION', 'LOAD', 'REPLACE', STORE_LIBRARY.replaceAll(STORE_LIBRARY_NAME, OTHER));
    const client = connect();
    const { l } = limiter(client, 10);
    expect(await admitted(l, 1)).toBe(1);
    expect(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'tollgate_*')).toHaveLength(2);
    // One consume of a fixed window of 3 under key fn:v, through either version's function
    // (the wire format of lua/parse.lua), its reply read as the store reads it.
    const consume = async (lib: string) => {
      const args = ['d 1000 1\nfcm-00 3 60000 3 0 0 3\n1 c1:1'];
      const fcall = (admin as unknown as { fcallBuffer(...a: (string | number)[]): Promise<Buffer> }).fcallBuffer.bind(admin);
      const reply = await fcall(`${lib}_store`, 1, 'fn:v', ...args);
      return parseDecisions(reply, [1])[0]?.allowed === true;
    };
    const taken = [await consume(OTHER), await consume(STORE_LIBRARY_NAME), await consume(OTHER), await consume(STORE_LIBRARY_NAME)];
    expect(taken).toEqual([true, true, true, false]);
    // This build's store goes on with its own library.
    expect(await admitted(l, 1)).toBe(1);
    await admin.call('FUNCTION', 'DELETE', OTHER);
    client.disconnect();
  });
});

describe.each(CLIENTS)('function library lost, on $name', (kind) => {
  let c: Connected;
  beforeAll(async () => {
    c = await kind.standalone(server.port);
  });
  afterAll(() => c.close());

  it('lost to FUNCTION FLUSH between decisions: reloaded, nothing fails or counts twice', async () => {
    const { l, errors } = limiter(c.client, 4);
    expect(await admitted(l, 2)).toBe(2);
    await admin.call('FUNCTION', 'FLUSH');
    // Three stacks in one tick (one batched FCALL), then one more on its own.
    const ds = await Promise.all([l.consume({}), l.consume({}), l.consume({})]);
    expect(ds.map((d) => d.allowed)).toEqual([true, true, false]);
    expect((await l.consume({})).allowed).toBe(false);
    expect(errors).toEqual([]);
    expect(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)).toHaveLength(1);
  });

  it('lost to a restart of the server: reloaded on the new connection', async () => {
    const { l } = limiter(c.client, 10);
    expect(await admitted(l, 1)).toBe(1);
    await server.stop();
    await server.start();
    await admin.ping();
    await ready(c.client);
    // The data went with the process (no persistence): a fresh budget, from the reloaded library.
    expect(await admitted(l, 3)).toBe(3);
    const s = await stats();
    expect(s.evalsha ?? 0).toBe(0);
    expect(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)).toHaveLength(1);
  });
});

describe('an ACL user without SETRANGE', () => {
  it('decides the same: an unchanged expiry is written with SET ... KEEPTTL instead', async () => {
    await admin.call('ACL', 'SETUSER', 'nosetrange', 'on', '>pw', '~*', '&*', '+@all', '-setrange');
    const c = connect('nosetrange');
    const { l, errors } = limiter(c);
    const store = new RedisStore({ client: c, prefix: 'fnsr:', timeoutMs: 5000, denyCache: false });
    store.on('error', (e) => errors.push(e));
    const stack = createLimiter({
      rules: [
        { name: 'a', key: () => 'k', limit: 3, ...FROM_FIRST },
        { name: 'b', key: () => 'k', limit: 3, ...FROM_FIRST },
      ],
      store,
      prefix: `fn${n++}`,
    });
    const before = await stats();
    // A lone op and a two-op stack, each admitted three times then refused.
    expect(await admitted(l, 5)).toBe(3);
    expect(await admitted(stack, 5)).toBe(3);
    const after = await stats();
    expect(delta(before, after, 'setrange')).toBe(0);
    // Per admission one write per key: the first a SET ... PXAT, the later ones KEEPTTL.
    expect(delta(before, after, 'set')).toBe(3 + 2 * 3);
    expect(errors).toEqual([]);
    for (const key of await admin.keys('fn*')) expect(await admin.pttl(key)).toBeGreaterThan(0);
    c.disconnect();
  });
});

describe('script fallback', () => {
  beforeAll(async () => {
    // FUNCTION refused (a managed service's ACL); FCALL refused though FUNCTION is allowed.
    await admin.call('ACL', 'SETUSER', 'nofunction', 'on', '>pw', '~*', '&*', '+@all', '-function');
    await admin.call('ACL', 'SETUSER', 'nofcall', 'on', '>pw', '~*', '&*', '+@all', '-fcall', '-fcall_ro');
  });

  describe.each(CLIENTS)('on $name', (kind) => {
    const as = (user?: string) => kind.standalone(server.port, user === undefined ? {} : { username: user, password: 'pw' });

    it('an ACL user without FUNCTION gets EVALSHA, decided once per connection', async () => {
      const c = await as('nofunction');
      const before = await stats();
      const { l, errors } = limiter(c.client);
      expect(await admitted(l, 5)).toBe(3);
      const after = await stats();
      expect(delta(before, after, 'fcall')).toBe(0);
      // EVALSHA, and EVAL where it answered NOSCRIPT: one script run per decision.
      expect(delta(before, after, 'evalsha') + delta(before, after, 'eval')).toBe(5);
      expect(errors).toEqual([]);
      await c.close();
    });

    it('an ACL user without FCALL (FUNCTION allowed) switches to EVALSHA at its first refusal', async () => {
      const c = await as('nofcall');
      const before = await stats();
      const { l, errors } = limiter(c.client);
      expect(await admitted(l, 5)).toBe(3);
      const after = await stats();
      expect(delta(before, after, 'fcall')).toBe(0);
      expect(delta(before, after, 'evalsha') + delta(before, after, 'eval')).toBe(5);
      expect(errors).toEqual([]);
      await c.close();
    });

    it('the concurrency slots run on the same path: FCALL, or EVALSHA for the user without FUNCTION', async () => {
      for (const [user, cmd] of [
        [undefined, 'fcall'],
        ['nofunction', 'evalsha'],
      ] as const) {
        const c = await as(user);
        const slots = new RedisSlotStore({ client: c.client, prefix: `fnslot${n++}:` });
        const before = await stats();
        const grants = await Promise.all([0, 1, 2].map((i) => slots.acquire('s', `id${i}`, 2, 1000)));
        expect(grants.map((g) => g.acquired).sort()).toEqual([false, true, true]);
        expect(await slots.count('s')).toBe(2);
        const after = await stats();
        expect(cmd === 'fcall' ? delta(before, after, 'fcall') : delta(before, after, 'evalsha') + delta(before, after, 'eval')).toBe(4);
        await c.close();
      }
    });
  });
});
