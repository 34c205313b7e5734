/**
 * Operations by key tell the truth on RedisStore: one that did not happen rejects with its
 * code, never resolves as if done. An ACL that refuses `DEL` (a real ACL user on this
 * file's redis-server), a breaker left open although Redis is back, a frozen Redis
 * (`CLIENT PAUSE`): `reset` and the others reject (`TG_STORE_ERROR`,
 * `TG_STORE_UNCONFIRMED`). A timed-out `block` and `penalize(40)` are applied once Redis
 * goes on, which the code says ("may have been applied"), and retried with the same
 * operation id they are not applied twice. On every client family.
 */
import { createLimiter, type Limiter, TollgateError } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, type ClientKind, type Connected } from '../setup/clients.js';
import { type RedisServer, rawCommand, startRedis } from '../setup/redis.js';

const NO_DEL = { username: 'tollgate-no-del', password: 'no-del' };
const NO_SCRIPTS = { username: 'tollgate-no-scripts', password: 'no-scripts' };
const LIMIT = 100;

let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
  // Everything but DEL: the library's keys function still writes with SET.
  expect(await rawCommand(server.port, `ACL SETUSER ${NO_DEL.username} on >${NO_DEL.password} ~* &* +@all -del`)).toMatch(/^\+OK/);
  // Neither functions nor scripts: no operation by key can run.
  expect(await rawCommand(server.port, `ACL SETUSER ${NO_SCRIPTS.username} on >${NO_SCRIPTS.password} ~* &* +@all -@scripting`)).toMatch(
    /^\+OK/,
  );
});
afterAll(async () => {
  admin?.disconnect();
  await server?.destroy();
});

async function rejection(p: Promise<unknown>): Promise<TollgateError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TollgateError);
  return err as TollgateError;
}

/** Freezes every client's writes: FCALL of the library (its functions may write) and DEL wait. */
async function freeze(): Promise<void> {
  expect(await rawCommand(server.port, 'CLIENT PAUSE 10000 WRITE')).toMatch(/^\+OK/);
}
async function thaw(): Promise<void> {
  expect(await rawCommand(server.port, 'CLIENT UNPAUSE')).toMatch(/^\+OK/);
}

describe.each(CLIENTS)('$name', (kind: ClientKind) => {
  let n = 0;
  const prefix = () => `truth:${kind.name.replace(/\W/g, '')}:${n++}:`;

  function limiterOn(c: Connected, p: string, timeoutMs = 2000, breaker?: { failures: number; cooldownMs: number }) {
    const store = new RedisStore({ client: c.client, prefix: p, timeoutMs, denyCache: false, ...(breaker ? { breaker } : {}) });
    store.on('error', () => {});
    // sliding-log: a penalty counts in full for an hour, wherever an hour ends while Redis is frozen.
    const rules = [{ name: 'r', key: (k: string) => k, algorithm: 'sliding-log' as const, limit: LIMIT, window: '1h' as const }];
    const l: Limiter<string> = createLimiter({ rules, store });
    return { l, store };
  }

  it('an ACL that refuses DEL: reset rejects with TG_STORE_ERROR and the key stays blocked', async () => {
    const c = await kind.standalone(server.port, NO_DEL);
    const { l, store } = limiterOn(c, prefix());
    try {
      expect((await l.block('r', 'a', '1h')).blocked).toBe(true);
      const err = await rejection(l.reset('r', 'a'));
      expect(err.code).toBe('TG_STORE_ERROR');
      expect(err.message).toMatch(/NOPERM/);
      expect((await l.get('r', 'a')).blocked).toBe(true);
      expect((await l.consume('a')).rules[0]?.reason).toBe('blocked');
    } finally {
      await store.close();
      await c.close();
    }
  });

  it('an ACL that refuses scripts and functions: every operation rejects with TG_STORE_ERROR (the NOPERM reply as its cause)', async () => {
    const c = await kind.standalone(server.port, NO_SCRIPTS);
    const { l, store } = limiterOn(c, prefix());
    try {
      for (const call of [
        () => l.get('r', 'a'),
        () => l.block('r', 'a', '1h'),
        () => l.unblock('r', 'a'),
        () => l.penalize('r', 'a', 1),
        () => l.reward('r', 'a', 1),
      ]) {
        const err = await rejection(call());
        expect(err.code).toBe('TG_STORE_ERROR');
        expect(String((err.cause as Error).message)).toMatch(/^NOPERM/);
      }
    } finally {
      await store.close();
      await c.close();
    }
  });

  it('a breaker open although Redis is back: reset reaches Redis (a decision would still be answered by the policy)', async () => {
    const c = await kind.standalone(server.port);
    // One failure opens it, and it stays open for the test.
    const { l, store } = limiterOn(c, prefix(), 200, { failures: 1, cooldownMs: 600_000 });
    try {
      await l.block('r', 'a', '1h');
      await freeze();
      try {
        expect((await l.consume('b')).degraded).toBe('local');
      } finally {
        await thaw();
      }
      expect(store.breakerState).toBe('open');
      await l.reset('r', 'a');
      expect((await l.get('r', 'a')).blocked).toBe(false);
      expect(await admin.exists(store.keyOf(l.rules[0]?.spec as never, 'a'))).toBe(0);
      expect(store.breakerState).toBe('open');
    } finally {
      await store.close();
      await c.close();
    }
  });

  it('Redis frozen: reset, block and penalize reject with TG_STORE_UNCONFIRMED (a get with TG_STORE_TIMEOUT); applied later; a retry with the same id is not applied twice', async () => {
    const c = await kind.standalone(server.port);
    // 1 s, not less: the calls after the thaw must answer within it on a machine at load 20.
    const { l, store } = limiterOn(c, prefix(), 1000);
    try {
      await l.penalize('r', 'gone', 1);
      await freeze();
      let errs: TollgateError[];
      try {
        errs = await Promise.all([
          rejection(l.reset('r', 'gone')),
          rejection(l.block('r', 'a', '1h', { id: 'block-a-1' })),
          rejection(l.penalize('r', 'b', 40, { id: 'charge-b-1' })),
          rejection(l.get('r', 'b')),
        ]);
      } finally {
        await thaw();
      }
      expect(errs.map((e) => e.code)).toEqual(['TG_STORE_UNCONFIRMED', 'TG_STORE_UNCONFIRMED', 'TG_STORE_UNCONFIRMED', 'TG_STORE_TIMEOUT']);
      expect(errs[2]?.message).toMatch(/may have been applied/);
      // Applied later all the same: a read sent now runs after them (one connection, in order).
      const later = await l.get('r', 'b');
      expect(later.remaining).toBe(LIMIT - 40);
      const blocked = await l.get('r', 'a');
      expect(blocked.blocked).toBe(true);
      expect((await l.get('r', 'gone')).exists).toBe(false);
      // The documented recipe, the same call with the same id: not applied twice.
      expect((await l.penalize('r', 'b', 40, { id: 'charge-b-1' })).remaining).toBe(LIMIT - 40);
      // (the block is not moved to an hour from now; the contract suite times it on a clock)
      expect((await l.block('r', 'a', '1h', { id: 'block-a-1' })).blockedUntil).toBe(blocked.blockedUntil);
      expect((await l.get('r', 'b')).remaining).toBe(LIMIT - 40);
      // A new id is a new change.
      expect((await l.penalize('r', 'b', 40, { id: 'charge-b-2' })).remaining).toBe(LIMIT - 80);
    } finally {
      await store.close();
      await c.close();
    }
  });
});
