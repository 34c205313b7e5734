/**
 * The MemoryStore tables (SPEC 6.2, packages/core/src/memory-table.ts): the typed-array slab
 * behaves exactly like the plain object table under any sequence of operations, rows are
 * reused across pages, blocked-only keys survive the packing, and rules of one group with
 * different algorithms do not read each other's numbers.
 */
import { createLimiter, ManualClock, MemoryStore } from '@tollgate/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ObjectTable, SlabTable, type Table } from '../src/memory-table.js';

type Op =
  | { kind: 'write'; key: number; s: number[] | undefined; b: number; x: number; hold: boolean }
  | { kind: 'read'; key: number; now: number }
  | { kind: 'delete'; key: number }
  | { kind: 'sweep'; now: number; limit: number | undefined }
  | { kind: 'hold'; key: number }
  | { kind: 'evict'; held: boolean; except: number };

const WIDTH = 3; // sliding-window
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('write' as const),
    key: fc.nat(20),
    s: fc.option(fc.array(fc.integer({ min: -1e12, max: 1e12 }), { minLength: WIDTH, maxLength: WIDTH }), { nil: undefined }),
    b: fc.oneof(fc.constant(0), fc.nat(1000)),
    x: fc.nat(1000),
    hold: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('read' as const), key: fc.nat(20), now: fc.nat(1000) }),
  fc.record({ kind: fc.constant('delete' as const), key: fc.nat(20) }),
  fc.record({ kind: fc.constant('sweep' as const), now: fc.nat(1000), limit: fc.option(fc.nat(8), { nil: undefined }) }),
  fc.record({ kind: fc.constant('hold' as const), key: fc.nat(20) }),
  fc.record({ kind: fc.constant('evict' as const), held: fc.boolean(), except: fc.nat(20) }),
);

function apply(t: Table, o: Op): unknown {
  switch (o.kind) {
    case 'write':
      return t.write(`k${o.key}`, o.s, o.b, o.x, o.hold);
    case 'read': {
      const s = t.read(`k${o.key}`, o.now);
      return { s, block: t.block, held: t.held };
    }
    case 'delete':
      return t.delete(`k${o.key}`);
    case 'sweep':
      return t.sweep(o.now, o.limit);
    case 'hold':
      return t.hold(`k${o.key}`);
    case 'evict':
      return t.evict(o.held, `k${o.except}`);
  }
}

describe('MemoryStore tables', () => {
  it('SlabTable answers every operation exactly as ObjectTable does', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const slab = new SlabTable('sliding-window');
        const objects = new ObjectTable('sliding-window');
        for (const o of ops) {
          expect(apply(slab, o)).toEqual(apply(objects, o));
          expect(slab.size).toBe(objects.size);
          expect(slab.liveSize).toBe(objects.liveSize);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('reuses freed rows and keeps every state exact across pages', () => {
    const t = new SlabTable('fixed-window');
    const N = 10_000; // more than two pages of rows
    for (let i = 0; i < N; i++) t.write(`k${i}`, [1.7e12 + i, i * 0.5], 0, 2e12, false);
    for (let i = 0; i < N; i += 2) t.delete(`k${i}`);
    for (let i = 0; i < N; i += 2) t.write(`n${i}`, [i, -i], 0, 2e12, false);
    expect(t.size).toBe(N);
    for (let i = 1; i < N; i += 2) expect(t.read(`k${i}`, 0)).toEqual([1.7e12 + i, i * 0.5]);
    for (let i = 0; i < N; i += 2) expect(t.read(`n${i}`, 0)).toEqual([i, -i]);
  });

  it('keeps a key that is only blocked (no algorithm state) with its block', () => {
    const t = new SlabTable('leaky-bucket');
    t.write('a', undefined, 500, 500, true);
    expect(t.read('a', 100)).toBeUndefined();
    expect(t.block).toBe(500);
    expect(t.read('a', 500)).toBeUndefined();
    expect(t.block).toBe(0);
    expect(t.size).toBe(0);
  });

  it('gives rules of one group with different algorithms (in different limiters) a table each', async () => {
    // In one stack such a group is refused at construction; across limiters the rule's kind
    // (algorithm and window) is part of its id.
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const fw = createLimiter({
      rules: [{ name: 'fw', group: 'g', key: () => 'k', algorithm: 'fixed-window', limit: 3, window: '1m' }],
      store,
      clock,
    });
    const tb = createLimiter({
      rules: [{ name: 'tb', group: 'g', key: () => 'k', algorithm: 'token-bucket', limit: 2, window: '1m' }],
      store,
      clock,
    });
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const a = await fw.consume({});
      const b = await tb.consume({});
      seen.push([a.allowed, a.rules[0]?.remaining, b.allowed, b.rules[0]?.remaining]);
    }
    // Neither reads the other's numbers (both states are two numbers wide: [windowStart,
    // count] and [last, tokens·W]).
    expect(seen).toEqual([
      [true, 2, true, 1],
      [true, 1, true, 0],
      [true, 0, false, 0],
      [false, 0, false, 0],
    ]);
    expect(store.size).toBe(2);
    await store.close();
  });
});
