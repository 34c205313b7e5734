import { describe, expect, it } from 'vitest';
import { constant, createLimiter, ManualClock, MemoryStore } from '@tollgate/core';

describe('quick', () => {
  it('fixed window rejects the 3rd and retries exactly', async () => {
    const clock = new ManualClock(1000);
    const store = new MemoryStore({ clock });
    const l = createLimiter({ rules: [{ name: 'g', key: constant('x'), limit: 2, window: '1s', algorithm: 'fixed-window' }], store, clock });
    expect((await l.consume({})).allowed).toBe(true);
    expect((await l.consume({})).allowed).toBe(true);
    const d = await l.consume({});
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBe(1000);
    expect(d.rejectedBy).toEqual(['g']);
    await store.close();
  });
});
