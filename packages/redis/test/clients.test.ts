/**
 * The clients RedisStore and RedisSlotStore take (issue 19, item 4): ioredis, iovalkey
 * (ioredis' fork, recognised by the same shape) and node-redis 5 and 6 (`createClient`;
 * cluster and Sentinel clients run the conformance and Sentinel suites). A node-redis
 * client used to be refused at construction.
 */
import { createLimiter, ManualClock, TollgateError } from '@tollgate/core';
import { RedisSlotStore, RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import * as redis5 from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS } from '../../../test/setup/clients.js';
import { keysWithoutExpiry, type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { portOf, type RedisPort, replyCode } from '../src/client.js';

let server: RedisServer;
let admin: Redis;
const SLOW = 10_000;

beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  expect(await keysWithoutExpiry(admin, 'cl:*')).toEqual([]);
  admin.disconnect();
  await server.destroy();
});

const clients: [string, () => Promise<{ client: object; close: () => unknown }>][] = [
  ...CLIENTS.filter((k) => k.name !== 'ioredis').map(
    (k) => [k.name, () => k.standalone(server.port)] as [string, () => Promise<{ client: object; close: () => unknown }>],
  ),
  [
    // With auto-pipelining ioredis drops the command name of a `callBuffer`: the port must not use it.
    'ioredis, auto-pipelining',
    async () => {
      const client = new Redis({ port: server.port, host: '127.0.0.1', enableAutoPipelining: true });
      return { client, close: () => client.disconnect() };
    },
  ],
  [
    'iovalkey',
    async () => {
      const client = new Valkey({ port: server.port, host: '127.0.0.1' });
      return { client, close: () => client.disconnect() };
    },
  ],
];

describe.each(clients)('%s', (name, connect) => {
  it('node-redis client is accepted at construction and decides in Redis (it was refused with TG_INVALID_OPTION)', async () => {
    const { client, close } = await connect();
    try {
      const store = new RedisStore({ client, prefix: 'cl:', timeoutMs: SLOW, denyCache: false });
      const errors: unknown[] = [];
      store.on('error', (e) => errors.push(e));
      // A still clock, mid-minute: on Redis time a minute boundary among the four consumes let the fourth through.
      const limiter = createLimiter({
        rules: [{ name: 'r', key: () => name, limit: 3, window: '1m' }],
        store,
        clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
      });
      const ds = [];
      for (let i = 0; i < 4; i++) ds.push(await limiter.consume({}));
      expect(ds.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(ds.every((d) => d.degraded === undefined)).toBe(true);
      // The count is in Redis: a second store over the admin client sees it.
      const other = createLimiter({
        rules: [{ name: 'r', key: () => name, limit: 3, window: '1m' }],
        store: new RedisStore({ client: admin, prefix: 'cl:', timeoutMs: SLOW }),
        clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
      });
      expect((await other.peek({})).rules[0]?.remaining).toBe(0);
      await limiter.reset({});
      // Reset in Redis: a peek (of cost 1) would leave 2 again.
      expect((await other.peek({})).rules[0]?.remaining).toBe(2);
      expect(errors).toEqual([]);
      await store.close();
    } finally {
      await close();
    }
  });

  it('script cache loss (SCRIPT FLUSH) is reloaded through the NOSCRIPT reply', async () => {
    const { client, close } = await connect();
    try {
      const store = new RedisStore({ client, prefix: 'cl:', timeoutMs: SLOW, denyCache: false });
      const errors: unknown[] = [];
      store.on('error', (e) => errors.push(e));
      // A still clock: a minute boundary between the consumes changed the remaining count.
      const limiter = createLimiter({
        rules: [{ name: 'f', key: () => name, limit: 5, window: '1m' }],
        store,
        clock: new ManualClock(Date.UTC(2026, 0, 1, 0, 0, 30)),
      });
      for (let i = 1; i <= 3; i++) {
        await admin.script('FLUSH');
        const d = await limiter.consume({});
        expect(d.degraded).toBeUndefined();
        expect(d.rules[0]?.remaining).toBe(5 - i);
      }
      expect(errors).toEqual([]);
      await limiter.reset({});
    } finally {
      await close();
    }
  });

  it('the port runs FUNCTION LOAD and FCALL with a Buffer reply, and names the one master', async () => {
    const { client, close } = await connect();
    try {
      const port = portOf(client) as RedisPort;
      const lib = "#!lua name=tg_port_test\nredis.register_function('tg_port_echo', function(keys, args) return args[1] end)";
      expect(await port.command(['FUNCTION', 'LOAD', 'REPLACE', lib])).toBe('tg_port_test');
      const reply = await port.fcall('tg_port_echo', ['cl:f'], ['\u00ff\u0000x']);
      expect(Buffer.isBuffer(reply)).toBe(true);
      expect((reply as Buffer).toString()).toBe('\u00ff\u0000x');
      expect(await port.masters()).toHaveLength(1);
      expect(port.cluster).toBe(false);
    } finally {
      await close();
    }
  });

  it('RedisSlotStore leases on this client', async () => {
    const { client, close } = await connect();
    try {
      const slots = new RedisSlotStore({ client, prefix: 'cl:slot:', timeoutMs: SLOW });
      expect(await slots.acquire(name, 'a', 1, 60_000)).toEqual({ acquired: true, inFlight: 1 });
      expect(await slots.acquire(name, 'b', 1, 60_000)).toEqual({ acquired: false, inFlight: 1 });
      expect(await slots.renew(name, 'a', 60_000)).toBe(true);
      await slots.release(name, 'a');
      expect(await slots.count(name)).toBe(0);
    } finally {
      await close();
    }
  });
});

describe('error replies of node-redis', () => {
  it('a real NOSCRIPT reply of node-redis (ErrorReply) is recognised by its code word', async () => {
    const client = redis5.createClient({ socket: { host: '127.0.0.1', port: server.port } });
    await client.connect();
    try {
      const err = await client.sendCommand(['EVALSHA', '0'.repeat(40), '0']).catch((e: unknown) => e);
      expect(replyCode(err)).toBe('NOSCRIPT');
      const other = await client.sendCommand(['EVAL', "return redis.error_reply('NOSCRIPT in user text')", '0']).catch((e: unknown) => e);
      expect(replyCode(other)).toBe('NOSCRIPT');
      const plain = await client
        .sendCommand(['EVAL', "return redis.error_reply('ERR NOSCRIPT in user text')", '0'])
        .catch((e: unknown) => e);
      expect(replyCode(plain)).toBe('ERR');
    } finally {
      client.destroy();
    }
  });

  it('a client of neither family is refused with TG_INVALID_OPTION naming both', () => {
    for (const client of [{}, { sendCommand: () => undefined }, { evalsha: () => undefined, eval: () => undefined }]) {
      let err: unknown;
      try {
        new RedisStore({ client });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe('TG_INVALID_OPTION');
      expect(String((err as Error).message)).toMatch(/ioredis.*node-redis/);
    }
  });
});
