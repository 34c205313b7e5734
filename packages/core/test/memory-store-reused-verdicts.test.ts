/**
 * MemoryStore decides a stack into verdicts it reuses and writes straight into the rows it
 * read (memory-store.ts, DECIDE). Pinned here: a decision made while another is being
 * written (from the eviction channel's subscriber) gets objects of its own and leaves the
 * other's figures alone, and rows read before an eviction are not written blindly after it.
 */
import { channels, createLimiter, ManualClock, MemoryStore } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

type Req = { k: string };

describe('MemoryStore reused verdicts', () => {
  it('a decision made from an eviction subscriber does not change the decision being written', () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ maxKeys: 1, sweepIntervalMs: 0 });
    const other = createLimiter<Req>({ rules: [{ name: 'x', key: (r) => r.k, limit: 1, window: '1h' }], store, clock });
    other.consumeSync({ k: 'a' });
    // 'a' refused: held, the only state, so the stack's new key must evict it (and publish).
    expect(other.consumeSync({ k: 'a' })?.allowed).toBe(false);
    const limiter = createLimiter<Req>({
      rules: [
        { name: 'ip', key: (r) => r.k, limit: 5, window: '1h', algorithm: 'fixed-window' },
        { name: 'global', key: () => 'all', limit: 100, window: '1h', algorithm: 'fixed-window' },
      ],
      store,
      clock,
    });
    const inner: unknown[] = [];
    const onEvicted = () => {
      if (inner.length > 0) return;
      const d = limiter.consumeSync({ k: 'c' }, { cost: 3 });
      inner.push(d?.rules.map((r) => [r.name, r.allowed, r.remaining]));
    };
    channels.memoryEvicted.subscribe(onEvicted);
    try {
      const d = limiter.consumeSync({ k: 'b' });
      expect(inner).toEqual([
        [
          ['ip', true, 2],
          ['global', true, 97],
        ],
      ]);
      expect(d?.allowed).toBe(true);
      expect(d?.rules.map((r) => [r.name, r.allowed, r.remaining])).toEqual([
        ['ip', true, 4],
        ['global', true, 99],
      ]);
    } finally {
      channels.memoryEvicted.unsubscribe(onEvicted);
    }
  });

  it('a stack whose first rule evicts the state its second rule read still counts the second', () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ maxKeys: 2, sweepIntervalMs: 0 });
    const limiter = createLimiter<Req>({
      rules: [
        // Limit 2: 'b' is admitted with a unit left, live (a key its admission empties is held).
        { name: 'ip', key: (r) => r.k, limit: 2, window: '1h', algorithm: 'fixed-window' },
        { name: 'global', key: () => 'all', limit: 100, window: '1h', algorithm: 'fixed-window' },
      ],
      store,
      clock,
    });
    limiter.consumeSync({ k: 'a' });
    limiter.consumeSync({ k: 'a' });
    expect(limiter.consumeSync({ k: 'a' })?.allowed).toBe(false); // ip:a held
    // ip:b is new and the store full: ip's table has nothing else live, so the oldest live
    // state of another table goes, global:all, whose row the decision had just read.
    expect(limiter.consumeSync({ k: 'b' })?.allowed).toBe(true);
    // global:all was written again after that eviction: three admissions counted.
    expect(limiter.consumeSync({ k: 'a' })?.rules[1]?.remaining).toBe(97);
  });
});
