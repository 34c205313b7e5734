/**
 * A rule's op is reused while its key, cost and rule are unchanged (each decision's ops array
 * is its own), and a MemoryStore finds each rule's table through the limiter's plan: neither
 * may let one decision's receipt, key or rule leak into another's.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, ManualClock, MemoryStore, type Rule } from '../src/index.js';
import { decisionOps } from '../src/limiter.js';

type Req = { k: string; cost?: number };

/** `plainCost`: the client rule costs a plain 1 (its op can be kept), not a cost function. */
function setup(limit = 10, plainCost = false) {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  const limiter = createLimiter<Req>({
    store,
    clock,
    rules: [
      { name: 'client', key: (r) => r.k, limit, window: '1m', algorithm: 'fixed-window', cost: plainCost ? 1 : (r) => r.cost ?? 1 },
      { name: 'route', key: () => 'GET /users', limit: 100, window: '1m', algorithm: 'fixed-window' },
    ],
  });
  return { clock, store, limiter };
}

/** Limiters of one rule each, on one MemoryStore and one manual clock. */
function onOneStore(...rules: Rule<Req>[]) {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  return { store, limiters: rules.map((rule) => createLimiter<Req>({ store, clock, rules: [rule] })) };
}

describe('reused ops', () => {
  it('a cost that changes for the same key makes a new op, and refunding the older decision gives back its own cost', async () => {
    const { limiter } = setup();
    const a = await limiter.consume({ k: 'alice', cost: 1 });
    const b = await limiter.consume({ k: 'alice', cost: 3 });
    const c = await limiter.consume({ k: 'alice', cost: 1 });
    expect(decisionOps(a)?.map((op) => op.cost)).toEqual([1, 1]);
    expect(decisionOps(b)?.map((op) => op.cost)).toEqual([3, 1]);
    expect(decisionOps(c)?.map((op) => op.cost)).toEqual([1, 1]);
    expect(c.rules[0]?.remaining).toBe(10 - 5);
    await limiter.refund({ k: 'alice' }, b);
    const d = await limiter.consume({ k: 'alice', cost: 1 });
    // Client: 5 used, b's 3 given back, 1 more: 3 used. Route: 3 used, b's 1 back, 1 more.
    expect(d.rules[0]?.remaining).toBe(10 - 3);
    expect(d.rules[1]?.remaining).toBe(100 - 3);
  });

  it('a key that changes and comes back is decided on its own state each time (the hashed route key too)', async () => {
    const { limiter } = setup(3);
    const seen: Array<[string, number | undefined]> = [];
    for (const k of ['a', 'b', 'a', 'a', 'b', 'a c', 'a c']) {
      const d = await limiter.consume({ k });
      const ops = decisionOps(d);
      expect(ops?.[0]?.raw).toBe(k);
      seen.push([ops?.[0]?.key as string, d.rules[0]?.remaining]);
    }
    expect(seen.slice(0, 5)).toEqual([
      ['a', 2],
      ['b', 2],
      ['a', 1],
      ['a', 0],
      ['b', 1],
    ]);
    // 'a c' has a space: hashed, the same hash for the same raw key, never 'a' or 'a c'.
    expect(seen[5]?.[0]).toMatch(/^#/);
    expect(seen[6]).toEqual([seen[5]?.[0], 1]);
    const refused = await limiter.consume({ k: 'a' });
    expect(refused.allowed).toBe(false);
    expect(refused.rejectedBy).toEqual(['client']);
  });

  it('after update, the next op carries the new rule (its limit decides), the state is kept', async () => {
    const { limiter } = setup(3);
    const before = await limiter.consume({ k: 'x' });
    limiter.update('client', { limit: 5 });
    const after = await limiter.consume({ k: 'x' });
    expect(decisionOps(before)?.[0]?.rule.limit).toBe(3);
    expect(decisionOps(after)?.[0]?.rule.limit).toBe(5);
    expect(after.rules[0]).toMatchObject({ limit: 5, remaining: 3 });
  });

  it('a kept op is handed out only for its own key and rule: a key that changes, then repeats, gets ops of its own; an update makes a new one', async () => {
    const {
      limiters: [limiter],
    } = onOneStore({ name: 'plain', key: (r) => r.k, limit: 10, window: '1m', algorithm: 'fixed-window' });
    if (limiter === undefined) throw new Error('no limiter');
    const ops = [];
    for (const k of ['a', 'a', 'a', 'b', 'b', 'b', 'a']) {
      const d = await limiter.consume({ k });
      ops.push(decisionOps(d)?.[0]);
      expect(d.rules[0]?.remaining).toBe(10 - ops.filter((op) => op?.raw === k).length);
    }
    expect(ops.map((op) => op?.key)).toEqual(['a', 'a', 'a', 'b', 'b', 'b', 'a']);
    // Kept once a key came twice in a row: the third 'a' and the third 'b' reuse the second's op.
    expect(ops[2]).toBe(ops[1]);
    expect(ops[5]).toBe(ops[4]);
    expect(ops[3]).not.toBe(ops[2]);
    expect(ops[6]).not.toBe(ops[2]);
    limiter.update('plain', { limit: 20 });
    const after = await limiter.consume({ k: 'a' });
    expect(decisionOps(after)?.[0]?.rule.limit).toBe(20);
    expect(after.rules[0]).toMatchObject({ limit: 20, remaining: 20 - 5 });
    // A per-call cost is never served from the kept op.
    const costly = await limiter.consume({ k: 'a' }, { cost: 4 });
    expect(decisionOps(costly)?.[0]?.cost).toBe(4);
    expect(costly.rules[0]?.remaining).toBe(20 - 9);
  });

  it('one store serving two stacks in turn finds each rule its own table (tables by position are per rule, not per place)', async () => {
    const {
      store,
      limiters: [fw, tb],
    } = onOneStore(
      { name: 'a', key: (r) => r.k, limit: 2, window: '1m', algorithm: 'fixed-window' },
      { name: 'b', key: (r) => r.k, limit: 5, window: '1m', algorithm: 'token-bucket' },
    );
    if (fw === undefined || tb === undefined) throw new Error('no limiters');
    const out: Array<[boolean, number | undefined]> = [];
    for (let i = 0; i < 3; i++) {
      const x = await fw.consume({ k: 'k' });
      const y = await tb.consume({ k: 'k' });
      out.push([x.allowed, x.rules[0]?.remaining], [y.allowed, y.rules[0]?.remaining]);
    }
    expect(out).toEqual([
      [true, 1],
      [true, 4],
      [true, 0],
      [true, 3],
      [false, 0],
      [true, 2],
    ]);
    await store.close();
    await expect(fw.consume({ k: 'k' })).rejects.toMatchObject({ code: 'TG_STORE_CLOSED' });
  });

  it("each decision has an ops array of its own, never resolve()'s, and refunds only its own units", async () => {
    const { limiter } = setup(10, true);
    const d = [];
    for (let i = 0; i < 4; i++) d.push(await limiter.consume({ k: 'alice' }));
    expect(decisionOps(d[1] as never)).not.toBe(decisionOps(d[0] as never));
    expect(decisionOps(d[2] as never)).not.toBe(decisionOps(d[1] as never));
    expect(decisionOps(d[3] as never)).toEqual(decisionOps(d[1] as never));
    // resolve() hands out an array of its own: changing it changes no later decision.
    const handed = limiter.resolve({ k: 'alice' });
    expect(handed).not.toBe(decisionOps(d[3] as never));
    handed.length = 0;
    const fifth = await limiter.consume({ k: 'alice' });
    expect(decisionOps(fifth)).toEqual(decisionOps(d[3] as never));
    expect(fifth.rules.map((r) => r.remaining)).toEqual([10 - 5, 100 - 5]);
    // Two decisions on the shared array: each refund gives back one unit per rule, once.
    await limiter.refund({ k: 'alice' }, d[2] as never);
    await limiter.refund({ k: 'alice' }, d[2] as never);
    await limiter.refund({ k: 'alice' }, d[3] as never);
    // 5 consumed, 2 given back; a peek reports what one more would leave.
    const after = await limiter.peek({ k: 'alice' });
    expect(after.rules.map((r) => r.remaining)).toEqual([10 - 3 - 1, 100 - 3 - 1]);
  });

  it('the shared ops array is left at the first rule whose op is not the kept one: a new key, an absent key, an update', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const limiter = createLimiter<{ k: string; t?: string }>({
      store,
      clock,
      rules: [
        { name: 'route', key: () => 'GET /', limit: 100, window: '1m', algorithm: 'fixed-window' },
        { name: 'tenant', key: (r) => r.t, limit: 50, window: '1m', algorithm: 'fixed-window' },
        { name: 'client', key: (r) => r.k, limit: 10, window: '1m', algorithm: 'fixed-window' },
      ],
    });
    for (let i = 0; i < 3; i++) await limiter.consume({ k: 'a', t: 'x' });
    const shared = decisionOps(await limiter.consume({ k: 'a', t: 'x' }));
    // Another client: the array is new, with the kept route and tenant ops and b's own.
    const b = await limiter.consume({ k: 'b', t: 'x' });
    expect(decisionOps(b)).not.toBe(shared);
    expect(decisionOps(b)?.map((op) => op.raw)).toEqual(['GET /', 'x', 'b']);
    expect(decisionOps(b)?.slice(0, 2)).toEqual(shared?.slice(0, 2));
    expect(b.rules.map((r) => r.remaining)).toEqual([100 - 5, 50 - 5, 10 - 1]);
    // No tenant: two ops, the tenant rule skipped.
    const none = await limiter.consume({ k: 'a' });
    expect(decisionOps(none)?.map((op) => op.rule.name)).toEqual(['route', 'client']);
    expect(none.rules.map((r) => r.remaining)).toEqual([100 - 6, 10 - 5]);
    // Back to the kept stack, then an update: the new rule decides at once.
    for (let i = 0; i < 3; i++) await limiter.consume({ k: 'a', t: 'x' });
    limiter.update('tenant', { limit: 60 });
    const updated = await limiter.consume({ k: 'a', t: 'x' });
    expect(decisionOps(updated)?.[1]?.rule.limit).toBe(60);
    expect(updated.rules.map((r) => [r.limit, r.remaining])).toEqual([
      [100, 100 - 10],
      [60, 60 - 9],
      [10, 10 - 9],
    ]);
  });

  it('a key that turns into a promise after the ops were shared is awaited, the rules before it keep their kept ops', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const limiter = createLimiter<{ k: string; later?: boolean }>({
      store,
      clock,
      rules: [
        { name: 'route', key: () => 'GET /', limit: 100, window: '1m', algorithm: 'fixed-window' },
        { name: 'client', key: (r) => (r.later ? Promise.resolve(r.k) : r.k), limit: 10, window: '1m', algorithm: 'fixed-window' },
      ],
    });
    for (let i = 0; i < 3; i++) await limiter.consume({ k: 'a' });
    const shared = decisionOps(await limiter.consume({ k: 'a' }));
    const later = await limiter.consume({ k: 'a', later: true });
    expect(decisionOps(later)).not.toBe(shared);
    expect(decisionOps(later)?.[0]).toEqual(shared?.[0]);
    expect(later.rules.map((r) => r.remaining)).toEqual([100 - 5, 10 - 5]);
    const again = await limiter.consume({ k: 'a' });
    expect(again.rules.map((r) => r.remaining)).toEqual([100 - 6, 10 - 6]);
  });

  it('a peek for another key while the ops are shared leaves the next decision for that key its own op (kept ops are matched by their raw key)', async () => {
    const { limiter } = setup(10, true);
    for (let i = 0; i < 3; i++) await limiter.consume({ k: 'a' });
    await limiter.peek({ k: 'b' });
    const b = await limiter.consume({ k: 'b' });
    expect(decisionOps(b)?.[0]?.raw).toBe('b');
    expect(b.rules.map((r) => r.remaining)).toEqual([10 - 1, 100 - 4]);
    const a = await limiter.consume({ k: 'a' });
    expect(decisionOps(a)?.[0]?.raw).toBe('a');
    expect(a.rules.map((r) => r.remaining)).toEqual([10 - 4, 100 - 5]);
  });

  it('a row the store dropped, or gave to another key since, is not read again for the key that had it', async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const client: Rule<Req> = { name: 'client', key: (r) => r.k, limit: 10, window: '1m', algorithm: 'fixed-window' };
    const route: Rule<Req> = { name: 'route', key: () => 'GET /', limit: 100, window: '1m', algorithm: 'fixed-window' };
    // The same client rule, at the first position of one stack and the second of the other.
    const first = createLimiter<Req>({ store, clock, rules: [client, route] });
    const second = createLimiter<Req>({ store, clock, rules: [{ ...route, name: 'other' }, client] });
    for (let i = 0; i < 3; i++) await first.consume({ k: 'a' });
    // Dropped: the next decision finds no state for 'a'.
    await first.reset('client', 'a');
    expect((await first.consume({ k: 'a' })).rules.map((r) => r.remaining)).toEqual([10 - 1, 100 - 4]);
    await first.consume({ k: 'a' });
    // Dropped again, and its row given to 'c' (five decisions) by the other stack.
    await first.reset('client', 'a');
    for (let i = 0; i < 5; i++) await second.consume({ k: 'c' });
    const a = await first.consume({ k: 'a' });
    expect(a.rules.map((r) => r.remaining)).toEqual([10 - 1, 100 - 6]);
    expect((await second.consume({ k: 'c' })).rules.map((r) => r.remaining)).toEqual([100 - 6, 10 - 6]);
    // Blocked by an operator between two decisions of a kept stack: refused at once.
    for (let i = 0; i < 3; i++) await first.consume({ k: 'a' });
    await first.block('client', 'a', 60_000);
    const blocked = await first.consume({ k: 'a' });
    expect(blocked.allowed).toBe(false);
    expect(blocked.rejectedBy).toEqual(['client']);
  });
});
