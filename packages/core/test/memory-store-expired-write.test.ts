/**
 * Regression: MemoryStore kept an entry whose new state was already expired when written
 * (e.g. a refund that empties a leaky queue), so when the clock then went backwards the
 * stale state came back to life and delayed a request that a fresh key admits at once.
 * SPEC 3: time going backwards is treated as no time passing.
 */
import { createLimiter, ManualClock, MemoryStore } from '@tollgate/core';
import { expect, it } from 'vitest';

it('MemoryStore revived an expired entry when the clock went backwards after a refund', async () => {
  const clock = new ManualClock(1_600_000_000_000);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
  const l = createLimiter({
    rules: [{ name: 'q', key: () => 'k', algorithm: 'leaky-bucket', mode: 'queue', limit: 1, window: 1000, queue: 1 }],
    store,
    clock,
  });
  const first = await l.consume({});
  expect(first.delayMs).toBe(1000);
  await l.refund({}, first);
  expect(store.size).toBe(0);
  clock.advance(-1);
  const d = await l.consume({ n: 0 }, { cost: 0 });
  expect(d.delayMs).toBe(0);
  await store.close();
});
