/**
 * `limiter.update` is per process: an application propagates a change over its own
 * configuration channel. The docs' example (docs/algorithms.md, "Changing a limit without
 * a restart") with Redis pub/sub, run for real: two instances sharing one RedisStore, each
 * subscribed; one message updates both, and a bad message changes nothing anywhere.
 */
import { createLimiter, type Limiter, ManualClock, type RuleChanges } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';

interface Req {
  tenant: string;
}

let server: RedisServer;
const open: Array<{ disconnect(): void } | { close(): Promise<void> }> = [];

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  for (const o of open.reverse()) 'close' in o ? await o.close() : o.disconnect();
  await server.destroy();
});

const CHANNEL = 'myapp:tollgate:update';

/** One application instance: its limiter on the shared Redis and its subscriber. */
async function instance(clock: ManualClock, errors: unknown[]): Promise<{ limiter: Limiter<Req>; applied: Promise<void>[] }> {
  const client = new Redis(server.port);
  const store = new RedisStore({ client, clock });
  const limiter = createLimiter<Req>({
    rules: [{ name: 'tenant', key: (r) => r.tenant, limit: 2, window: '1m', algorithm: 'fixed-window' }],
    store,
    clock,
  });
  // The subscriber: a connection of its own (a subscribed connection runs no other command).
  const sub = new Redis(server.port);
  open.push(client, sub, store);
  const applied: Promise<void>[] = [];
  let settle: () => void = () => {};
  const next = () => applied.push(new Promise<void>((r) => (settle = r)));
  next();
  sub.on('message', (_channel, text) => {
    try {
      const { rule, changes } = JSON.parse(text) as { rule: string; changes: RuleChanges<Req> };
      limiter.update(rule, changes); // validated: a bad message throws and changes nothing
    } catch (err) {
      errors.push(err);
    }
    settle();
    next();
  });
  await sub.subscribe(CHANNEL);
  return { limiter, applied };
}

it('one published update reaches every instance; a bad one is refused by each and changes nothing', async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const errors: unknown[] = [];
  const a = await instance(clock, errors);
  const b = await instance(clock, errors);
  const pub = new Redis(server.port);
  open.push(pub);
  const acme = { tenant: 'acme' };

  expect((await a.limiter.consume(acme)).allowed).toBe(true);
  expect((await b.limiter.consume(acme)).allowed).toBe(true);
  expect((await a.limiter.consume(acme)).allowed).toBe(false);

  // Raise the tenant's limit everywhere.
  expect(await pub.publish(CHANNEL, JSON.stringify({ rule: 'tenant', changes: { limit: 4 } }))).toBe(2);
  await Promise.all([a.applied[0], b.applied[0]]);
  const da = await a.limiter.consume(acme);
  expect(da.rules[0]).toMatchObject({ limit: 4, allowed: true, remaining: 1 });
  const db = await b.limiter.consume(acme);
  expect(db.rules[0]).toMatchObject({ limit: 4, allowed: true, remaining: 0 });
  expect((await a.limiter.consume(acme)).allowed).toBe(false);

  // A malformed update (unknown field) is refused by each instance, which keep their limit.
  await pub.publish(CHANNEL, JSON.stringify({ rule: 'tenant', changes: { limti: 100 } }));
  await Promise.all([a.applied[1], b.applied[1]]);
  expect(errors.map((e) => (e as { code?: string }).code)).toEqual(['TG_UNKNOWN_OPTION', 'TG_UNKNOWN_OPTION']);
  expect(a.limiter.rules[0]?.spec.limit).toBe(4);
  expect(b.limiter.rules[0]?.spec.limit).toBe(4);
});
