/**
 * Bug: a kept row was written through another rule's table. MemoryStore keeps, per position
 * of a stack, the row the last decision found and reuses it for the same op; it writes the
 * decision through the table it last looked up for that position. A decision refused by a
 * block at that position (another limiter on the store, or the same stack with a key absent,
 * which moves the later rules up) looked up its own table and returned before the kept row
 * was let go, so the next decision of the kept op read its own row and wrote, held or
 * deleted through the blocked rule's table: with another width the count was lost (a
 * sliding window admitted without end), and a refused key was held in the wrong table (a
 * flood of new keys evicted it into a fresh budget).
 */
import { createLimiter, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

type Req = { user?: string; ip?: string };

function outcomes(ds: { allowed: boolean; rules: { remaining: number }[] }[]): string[] {
  return ds.map((d) => `${d.allowed ? 'admitted' : 'refused'} ${d.rules.map((r) => r.remaining).join('/')}`);
}

/** An `api` limiter with `api` as its one rule and a fixed-window `login` limiter, on one store. */
function apiAndLogin(api: Rule<Req>, maxKeys?: number) {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock, sweepIntervalMs: 0, ...(maxKeys === undefined ? {} : { maxKeys }) });
  const login: Rule<Req> = { name: 'login', key: (r) => r.user, limit: 5, window: '1m', algorithm: 'fixed-window' };
  return {
    store,
    api: createLimiter<Req>({ store, clock, rules: [api] }),
    login: createLimiter<Req>({ store, clock, rules: [login] }),
  };
}

describe('MemoryStore kept rows and the table a decision writes through', () => {
  it('a blocked request of another limiter on the store leaves a kept sliding window counting', async () => {
    const { api, login } = apiAndLogin({ name: 'api', key: (r) => r.user, limit: 3, window: '1m', algorithm: 'sliding-window' });
    const ds = [await api.consume({ user: 'mallory' }), await api.consume({ user: 'mallory' })];
    await login.block('login', 'mallory', '1m');
    expect((await login.consume({ user: 'mallory' })).rejectedBy).toEqual(['login']);
    for (let i = 0; i < 4; i++) ds.push(await api.consume({ user: 'mallory' }));
    expect(outcomes(ds)).toEqual(['admitted 2', 'admitted 1', 'admitted 0', 'refused 0', 'refused 0', 'refused 0']);
    expect((await api.get('api', 'mallory')).remaining).toBe(0);
  });

  it("another client's blocked request without a user key leaves the user rule of a kept stack counting", async () => {
    const clock = new ManualClock(1_000_000);
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const limiter = createLimiter<Req>({
      store,
      clock,
      rules: [
        { name: 'user', key: (r) => r.user, limit: 3, window: '1m', algorithm: 'sliding-window' },
        { name: 'ip', key: (r) => r.ip, limit: 100, window: '1m', algorithm: 'fixed-window' },
      ],
    });
    const ds = [await limiter.consume({ user: 'u', ip: '10.0.0.1' }), await limiter.consume({ user: 'u', ip: '10.0.0.1' })];
    // Anonymous and blocked: its 'ip' rule is the stack's first op.
    await limiter.block('ip', '10.0.0.9', '1m');
    expect((await limiter.consume({ ip: '10.0.0.9' })).rejectedBy).toEqual(['ip']);
    for (let i = 0; i < 4; i++) ds.push(await limiter.consume({ user: 'u', ip: '10.0.0.1' }));
    expect(outcomes(ds)).toEqual(['admitted 2/99', 'admitted 1/98', 'admitted 0/97', 'refused 0/97', 'refused 0/97', 'refused 0/97']);
  });

  it('a key refused on a kept row is held in its own table: a flood of new keys does not evict it into a fresh budget', async () => {
    const { store, api, login } = apiAndLogin({ name: 'api', key: (r) => r.user, limit: 2, window: '1m', algorithm: 'fixed-window' }, 4);
    await api.consume({ user: 'victim' });
    await api.consume({ user: 'victim' });
    await login.block('login', 'x', '1m');
    await login.consume({ user: 'x' });
    expect((await api.consume({ user: 'victim' })).allowed).toBe(false);
    for (let i = 0; i < 6; i++) expect((await api.consume({ user: `new${i}` })).allowed).toBe(true);
    const after = await api.consume({ user: 'victim' });
    expect(after.allowed).toBe(false);
    expect(after.rejectedBy).toEqual(['api']);
    expect(store.heldEvictions).toBe(0);
  });
});
