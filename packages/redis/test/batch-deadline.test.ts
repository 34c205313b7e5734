/**
 * The deadline of batched decisions (standalone Redis, `batch: true`): one timer covers the
 * stacks asked in the same tick, armed when the first of them is asked, so none waits longer
 * than `timeoutMs`; every one that times out or fails is a failure of its own (breaker and
 * `'error'` event per decision, as on the unbatched path). A client that never answers (or
 * answers late) stands in for Redis; fake timers stand in for time.
 */
import { createLimiter, type StoreDecision } from '@tollgate/core';
import { RedisStore, type StoreErrorEvent } from '@tollgate/redis';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

interface Call {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/** A client whose script runs settle only when the test says so. */
function heldClient(): { client: ConstructorParameters<typeof RedisStore>[0]['client']; calls: Call[] } {
  const calls: Call[] = [];
  const run = (): Promise<unknown> =>
    new Promise((resolve, reject) => {
      calls.push({ resolve, reject });
    });
  const client = { evalsha: run, eval: run, evalshaBuffer: run, evalBuffer: run, del: async () => 0, call: async () => 0, callBuffer: run };
  return { client, calls };
}

function limiterOn(store: RedisStore) {
  return createLimiter<{ ip: string }>({ rules: [{ name: 'ip', key: (r) => r.ip, limit: 10, window: '1m' }], store });
}

/**
 * Two decisions asked in one tick of a store on `client` with `onStoreError: 'deny'`: the
 * errors it publishes, the timers running before them, and their decisions.
 */
function twoDenied(client: ConstructorParameters<typeof RedisStore>[0]['client']) {
  const store = new RedisStore({ client, timeoutMs: 50, onStoreError: 'deny', denyCache: false });
  const errors: unknown[] = [];
  store.on('error', (e: StoreErrorEvent) => errors.push(e.error));
  const l = limiterOn(store);
  const timers = vi.getTimerCount();
  const asked = Promise.all(['a', 'b'].map((ip) => store.consume(l.resolve({ ip }))));
  return { errors, timers, asked };
}

describe('RedisStore batched deadline', () => {
  beforeEach(() => {
    // The store measures deadlines on the monotonic clock (performance.now()): faked too.
    vi.useFakeTimers({
      toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'Date', 'performance'],
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('one timer for a tick: all of its decisions time out together, each a failure of its own; a late reply changes nothing', async () => {
    const { client, calls } = heldClient();
    const store = new RedisStore({ client, timeoutMs: 50, onStoreError: 'allow', breaker: { failures: 10, cooldownMs: 1000 } });
    const errors: StoreErrorEvent[] = [];
    store.on('error', (e: StoreErrorEvent) => errors.push(e));
    const l = limiterOn(store);
    const timers = vi.getTimerCount(); // the store's own (its local fallback's sweep)
    const settled: StoreDecision[] = [];
    const asked = ['a', 'b', 'c'].map((ip) => store.consume(l.resolve({ ip })).then((d) => settled.push(d)));
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toHaveLength(1); // one script run for the three
    expect(vi.getTimerCount()).toBe(timers + 1); // one deadline for the three
    await vi.advanceTimersByTimeAsync(49);
    expect(settled).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    await Promise.all(asked);
    expect(settled.map((d) => d.degraded)).toEqual(['allow', 'allow', 'allow']);
    expect(errors.map((e) => [e.operation, (e.error as { code?: string }).code])).toEqual([
      ['consume', 'TG_STORE_TIMEOUT'],
      ['consume', 'TG_STORE_TIMEOUT'],
      ['consume', 'TG_STORE_TIMEOUT'],
    ]);
    (calls[0] as Call).reject(new Error('late'));
    await vi.advanceTimersByTimeAsync(0);
    expect(errors).toHaveLength(3);
    expect(store.breakerState).toBe('closed');
  });

  it('a decision asked in a later tick gets its own deadline', async () => {
    const { client } = heldClient();
    const store = new RedisStore({ client, timeoutMs: 50, onStoreError: 'deny', breaker: { failures: 10, cooldownMs: 1000 } });
    const l = limiterOn(store);
    const at: Record<string, number> = {};
    const t0 = Date.now();
    const first = store.consume(l.resolve({ ip: 'a' })).then(() => {
      at.a = Date.now() - t0;
    });
    await vi.advanceTimersByTimeAsync(30);
    const second = store.consume(l.resolve({ ip: 'b' })).then(() => {
      at.b = Date.now() - t0;
    });
    await vi.advanceTimersByTimeAsync(20);
    await first;
    expect(at).toEqual({ a: 50 });
    await vi.advanceTimersByTimeAsync(30);
    await second;
    expect(at).toEqual({ a: 50, b: 80 });
  });

  it('a failed script run fails each of its decisions at once and clears the deadline', async () => {
    const { client, calls } = heldClient();
    const { errors, timers, asked } = twoDenied(client);
    await vi.advanceTimersByTimeAsync(0);
    const boom = new Error('boom');
    (calls[0] as Call).reject(boom);
    const ds = await asked;
    expect(ds.map((d) => [d.allowed, d.degraded])).toEqual([
      [false, 'deny'],
      [false, 'deny'],
    ]);
    expect(errors).toEqual([boom, boom]);
    // The deadline timer fires once more at most, finds nothing to fail, and is gone.
    await vi.advanceTimersByTimeAsync(50);
    expect(errors).toEqual([boom, boom]);
    expect(vi.getTimerCount()).toBe(timers);
  });

  it("a throwing 'error' listener does not change the decision the failure policy gives (it rejected each decision with its error)", async () => {
    const { client } = heldClient();
    const store = new RedisStore({ client, timeoutMs: 20, onStoreError: 'allow', denyCache: false });
    const warned = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const bug = new Error('listener bug');
    let calls = 0;
    let after = 0;
    store.on('error', () => {
      calls++;
      throw bug;
    });
    // A listener after the throwing one still hears every failure.
    store.on('error', () => after++);
    const l = limiterOn(store);
    try {
      const asked = Promise.allSettled(['x', 'y'].map((ip) => store.consume(l.resolve({ ip }))));
      await vi.advanceTimersByTimeAsync(20);
      const settled = await asked;
      expect(settled.map((r) => r.status === 'fulfilled' && [r.value.allowed, r.value.degraded])).toEqual([
        [true, 'allow'],
        [true, 'allow'],
      ]);
      expect([calls, after, store.listenerFailures]).toEqual([2, 2, 2]);
      // Reported once per store, as a coded warning.
      const codes = warned.mock.calls.map((c) => (c[1] as { code?: string } | undefined)?.code);
      expect(codes).toEqual(['TOLLGATE_REDIS_LISTENER_FAILED']);
    } finally {
      warned.mockRestore();
    }
  });

  it('a client that throws instead of rejecting fails that run at once, without a deadline left behind', async () => {
    const boom = new Error('sync boom');
    const thrower = () => {
      throw boom;
    };
    const client = {
      evalsha: thrower,
      eval: thrower,
      evalshaBuffer: thrower,
      evalBuffer: thrower,
      del: async () => 0,
      call: async () => 0,
      callBuffer: thrower,
    };
    const { errors, timers, asked } = twoDenied(client);
    await vi.advanceTimersByTimeAsync(0);
    const ds = await asked;
    expect(ds.map((d) => d.degraded)).toEqual(['deny', 'deny']);
    expect(errors).toEqual([boom, boom]);
    expect(vi.getTimerCount()).toBe(timers);
  });

  it('bug: every batched tick armed and cleared a deadline timer of its own (a request alone in its tick paid for one)', async () => {
    const { client, calls } = heldClient();
    const store = new RedisStore({ client, timeoutMs: 50, onStoreError: 'deny', denyCache: false });
    const l = limiterOn(store);
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      for (let i = 0; i < 20; i++) {
        const d = store.consume(l.resolve({ ip: 'a' }));
        await vi.advanceTimersByTimeAsync(0);
        (calls[i] as Call).resolve(admitted(Date.now()));
        expect((await d).degraded).toBeUndefined();
        await vi.advanceTimersByTimeAsync(1);
      }
      // One deadline timer for the twenty runs (it was twenty), and its re-arming while
      // nothing is in flight holds nothing: time running on past every deadline fails none.
      expect(spy.mock.calls.length).toBeLessThanOrEqual(2);
      await vi.advanceTimersByTimeAsync(200);
      expect(spy.mock.calls.length).toBeLessThanOrEqual(2);
    } finally {
      spy.mockRestore();
    }
  });

  it('a run answered in time does not delay the deadline of a later one', async () => {
    const { client, calls } = heldClient();
    const store = new RedisStore({ client, timeoutMs: 50, onStoreError: 'deny', denyCache: false });
    const l = limiterOn(store);
    const t0 = Date.now();
    const first = store.consume(l.resolve({ ip: 'a' }));
    await vi.advanceTimersByTimeAsync(10);
    (calls[0] as Call).resolve(admitted(Date.now()));
    expect((await first).allowed).toBe(true);
    await vi.advanceTimersByTimeAsync(20);
    let at = -1;
    const second = store.consume(l.resolve({ ip: 'b' })).then((d) => {
      at = Date.now() - t0;
      return d;
    });
    await vi.advanceTimersByTimeAsync(49);
    expect(at).toBe(-1);
    await vi.advanceTimersByTimeAsync(1);
    expect((await second).degraded).toBe('deny');
    expect(at).toBe(80);
  });
});

/** The packed reply of one admitted single-rule stack (see args.ts parseDecisions). */
function admitted(now: number): Buffer {
  const b = Buffer.alloc(6 * 8);
  for (const [i, x] of [1, now, 1, 9, 60_000, 0].entries()) b.writeDoubleLE(x, i * 8);
  return b;
}

describe('RedisStore batched deadline, real timers', () => {
  it('holds no timer that keeps the process alive once every run is answered', async () => {
    const { client, calls } = heldClient();
    const store = new RedisStore({ client, timeoutMs: 5000, onStoreError: 'deny', denyCache: false });
    const l = limiterOn(store);
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const d = store.consume(l.resolve({ ip: 'a' }));
    await new Promise((r) => setImmediate(r));
    expect(timers()).toBe(before + 1); // the deadline, while the run is in flight
    (calls[0] as Call).resolve(admitted(Date.now()));
    expect((await d).degraded).toBeUndefined();
    expect(timers()).toBe(before);
    await store.close();
  });
});
