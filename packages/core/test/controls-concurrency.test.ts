import diagnosticsChannel from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';
import { type ConcurrencyOutcome, createConcurrency, ManualClock, ManualTimers, MemorySlotStore, TollgateError } from '@tollgate/core';
import { acquireWhileConnected } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

type Req = { k?: string };
const key = (r: Req) => r.k;

function admitted(o: ConcurrencyOutcome | undefined): o is ConcurrencyOutcome & { admitted: true } {
  return o?.admitted === true;
}

describe('concurrency (SPEC 8.3)', () => {
  it('max 3 per key: of 10 at once exactly 3 hold a slot, 7 are refused with 429; all free after release', async () => {
    const store = new MemorySlotStore();
    const limit = createConcurrency<Req>({ max: 3, key, store });
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => limit.acquire({ k: 'a' })));
    const ok = outcomes.filter(admitted);
    expect(ok).toHaveLength(3);
    expect(await limit.count({ k: 'a' })).toEqual({ key: 3, global: undefined });
    const refused = outcomes.filter((o) => o?.admitted === false);
    expect(refused.map((o) => (o as { status: number }).status)).toEqual(Array(7).fill(429));
    // Another key is not affected.
    expect((await limit.acquire({ k: 'b' }))?.admitted).toBe(true);
    for (const o of ok) {
      o.release();
      o.release(); // exactly once, however often it is called
    }
    await Promise.resolve();
    expect(await limit.count({ k: 'a' })).toEqual({ key: 0, global: undefined });
    expect(limit.held).toBe(1);
    await limit.close();
  });

  it('reports figures: max and slots in flight after the decision', async () => {
    const limit = createConcurrency<Req>({ max: 2, global: 5, key });
    const o = await limit.acquire({ k: 'a' });
    expect(o?.admitted && o.figures).toEqual([
      { name: 'concurrency', scope: 'key', limit: 2, inFlight: 1 },
      { name: 'concurrency-global', scope: 'global', limit: 5, inFlight: 1 },
    ]);
    await limit.close();
  });

  it('a global refusal is 503 and gives back the per-key slot it took', async () => {
    const store = new MemorySlotStore();
    const limit = createConcurrency<Req>({ max: 5, global: 2, key, store });
    expect((await limit.acquire({ k: 'a' }))?.admitted).toBe(true);
    expect((await limit.acquire({ k: 'b' }))?.admitted).toBe(true);
    const o = await limit.acquire({ k: 'c' });
    expect(o).toMatchObject({ admitted: false, status: 503, scope: 'global', reason: 'full' });
    expect(await limit.count({ k: 'c' })).toEqual({ key: 0, global: 2 });
    await limit.close();
  });

  it('a bounded queue: waiters get slots in arrival order as others finish; the queue overflows with 429', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const limit = createConcurrency<Req>({ max: 1, queue: 2, queueTimeout: '10s', key, timers });
    const first = await limit.acquire({ k: 'a' });
    const order: string[] = [];
    const track = (name: string) => (o: ConcurrencyOutcome | undefined) => {
      order.push(name);
      return o;
    };
    const second = limit.acquire({ k: 'a' }).then(track('second'));
    const third = limit.acquire({ k: 'a' }).then(track('third'));
    await timers.advance(0);
    expect(limit.waiting).toBe(2);
    expect(await limit.acquire({ k: 'a' })).toMatchObject({ admitted: false, reason: 'queue-full', status: 429 });
    if (!admitted(first)) throw new Error('first not admitted');
    first.release();
    const s = await second;
    expect(order).toEqual(['second']);
    if (!admitted(s)) throw new Error('second not admitted');
    s.release();
    const t = await third;
    expect(admitted(t)).toBe(true);
    if (admitted(t)) t.release();
    await timers.advance(0);
    expect(timers.pending).toBe(0);
    expect(await limit.count({ k: 'a' })).toEqual({ key: 0, global: undefined });
    await limit.close();
  });

  it('a waiter is refused at queueTimeout, and an aborted waiter takes nothing', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const limit = createConcurrency<Req>({ max: 1, queue: 5, queueTimeout: '2s', key, timers });
    const holder = await limit.acquire({ k: 'a' });
    const late = limit.acquire({ k: 'a' });
    const ac = new AbortController();
    const gone = limit.acquire({ k: 'a' }, ac.signal);
    await timers.advance(0);
    ac.abort();
    expect(await gone).toEqual({ admitted: false, reason: 'aborted' });
    await timers.advance(1999);
    expect(limit.waiting).toBe(1);
    await timers.advance(1);
    expect(await late).toMatchObject({ admitted: false, reason: 'queue-timeout', status: 429 });
    expect(limit.waiting).toBe(0);
    if (admitted(holder)) holder.release();
    await timers.advance(0);
    expect(await limit.count({ k: 'a' })).toEqual({ key: 0, global: undefined });
    expect(timers.pending).toBe(0);
    await limit.close();
  });

  it('a store failing on the global slot gives the per-key slot back before the error surfaces', async () => {
    const inner = new MemorySlotStore();
    const store = Object.assign(Object.create(inner) as MemorySlotStore, {
      acquire: (key: string, id: string, max: number) =>
        key.endsWith(':*') ? Promise.reject(new Error('down')) : inner.acquire(key, id, max),
      release: (key: string, id: string) => inner.release(key, id),
      count: (key: string) => inner.count(key),
    });
    const limit = createConcurrency<Req>({ max: 2, global: 5, key, store });
    await expect(limit.acquire({ k: 'a' })).rejects.toThrow('down');
    expect(await inner.count('tg-cc:concurrency:a')).toBe(0);
    expect(inner.keys).toBe(0);
  });

  it('a release wakes only the waiters it can help: those of its key and those held up by the global limit', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const inner = new MemorySlotStore();
    const asked: string[] = [];
    const store = Object.assign(Object.create(inner) as MemorySlotStore, {
      acquire: (slot: string, id: string, max: number) => {
        asked.push(slot);
        return inner.acquire(slot, id, max);
      },
      release: (slot: string, id: string) => inner.release(slot, id),
      count: (slot: string) => inner.count(slot),
    });
    const limit = createConcurrency<Req>({ max: 1, global: 3, queue: 5, key, store, timers });
    const a1 = await limit.acquire({ k: 'a' });
    const b1 = await limit.acquire({ k: 'b' });
    const c1 = await limit.acquire({ k: 'c' });
    const a2 = limit.acquire({ k: 'a' }); // waits on key a
    const d1 = limit.acquire({ k: 'd' }); // waits on the global limit (3 in flight)
    await timers.advance(0);
    asked.length = 0;
    if (admitted(b1)) b1.release(); // frees key b and one global slot
    expect(admitted(await d1)).toBe(true); // the global waiter gets it
    await timers.advance(0);
    // a2 was not asked: a release under b cannot free key a.
    expect(asked.filter((slot) => slot.endsWith(':a'))).toEqual([]);
    if (admitted(a1)) a1.release();
    expect(admitted(await a2)).toBe(true);
    for (const o of [c1]) if (admitted(o)) o.release();
    await limit.close();
  });

  it('requests without a key take only the global slot; skip takes none', async () => {
    const limit = createConcurrency<Req & { skip?: boolean }>({ max: 1, global: 1, key, skip: (r) => r.skip === true });
    expect(await limit.acquire({ skip: true })).toBeUndefined();
    const o = await limit.acquire({});
    expect(o?.admitted && o.figures.map((f) => f.scope)).toEqual(['global']);
    await limit.close();
  });

  it('close refuses waiters and closes the store it created', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const limit = createConcurrency<Req>({ max: 1, queue: 1, key, timers });
    await limit.acquire({ k: 'a' });
    const waiting = limit.acquire({ k: 'a' });
    await timers.advance(0);
    await limit.close();
    expect(await waiting).toEqual({ admitted: false, reason: 'aborted' });
    expect(timers.pending).toBe(0);
    await expect(limit.acquire({ k: 'b' })).rejects.toBeInstanceOf(TollgateError);
  });

  it('rejects bad options with stable codes', () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{}, 'TG_INVALID_OPTION'],
      [{ max: 0 }, 'TG_INVALID_LIMIT'],
      [{ max: 1, queue: -1 }, 'TG_INVALID_LIMIT'],
      [{ max: 1, queueTimeout: 'later' }, 'TG_INVALID_DURATION'],
      [{ max: 1, name: 'a"b' }, 'TG_INVALID_OPTION'],
      [{ max: 1, maxx: 1 }, 'TG_UNKNOWN_OPTION'],
    ];
    for (const [o, code] of bad) {
      expect(() => createConcurrency(o as never), JSON.stringify(o)).toThrow(expect.objectContaining({ code }));
    }
  });
});

describe('acquireWhileConnected (how both adapters take a slot)', () => {
  type Answer = [string | undefined, string, string, ConcurrencyOutcome | undefined];

  it('a client that disconnects while queued gives up its place, and the close listener is removed', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const limit = createConcurrency<Req>({ max: 1, queue: 5, queueTimeout: '2s', key, timers });
    await limit.acquire({ k: 'a' });
    const raw = new EventEmitter();
    const answered = new Promise<Answer>((resolve) => {
      acquireWhileConnected(limit, { k: 'a' }, raw, 'res', 'next', (req, res, next, o) => resolve([req.k, res, next, o]));
    });
    await timers.advance(0);
    expect(limit.waiting).toBe(1);
    raw.emit('close');
    expect(await answered).toEqual(['a', 'res', 'next', { admitted: false, reason: 'aborted' }]);
    expect(raw.listenerCount('close')).toBe(0);
    expect(limit.waiting).toBe(0);
  });

  it('a failing slot store answers undefined (no slot) and publishes the failure', async () => {
    const failing = new MemorySlotStore();
    failing.acquire = () => Promise.reject(new Error('slot store down'));
    const limit = createConcurrency<Req>({ max: 1, key, store: failing, name: 'slots' });
    const seen: unknown[] = [];
    const listener = (m: unknown) => seen.push(m);
    diagnosticsChannel.subscribe('tollgate:store-error', listener);
    try {
      const raw = new EventEmitter();
      const answer = await new Promise<Answer>((resolve) => {
        acquireWhileConnected(limit, { k: 'a' }, raw, 'res', 'next', (req, res, next, o) => resolve([req.k, res, next, o]));
      });
      expect(answer).toEqual(['a', 'res', 'next', undefined]);
      expect(raw.listenerCount('close')).toBe(0);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ limiter: 'slots', action: 'allow' });
    } finally {
      diagnosticsChannel.unsubscribe('tollgate:store-error', listener);
    }
  });
});

describe('concurrency: a client that leaves while the slot store answers', () => {
  it('does not join the queue: its place stays free for the next client (a shared store answers later)', async () => {
    // A store whose answers wait until released by the test, as a Redis round trip does.
    const inner = new MemorySlotStore();
    let hold: (() => void) | undefined;
    const store = Object.assign(Object.create(inner) as MemorySlotStore, {
      async acquire(key: string, id: string, max: number) {
        if (hold === undefined) await new Promise<void>((r) => (hold = r));
        return inner.acquire(key, id, max);
      },
    });
    const timers = new ManualTimers(new ManualClock(0));
    const limit = createConcurrency({ max: 1, queue: 1, queueTimeout: '1h', store, timers });
    hold = () => {};
    const first = await limit.acquire({});
    expect(first?.admitted).toBe(true);
    hold = undefined;
    const gone = new AbortController();
    const leaving = limit.acquire({}, gone.signal);
    await new Promise((r) => setImmediate(r));
    gone.abort();
    (hold as unknown as () => void)();
    expect(await leaving).toEqual({ admitted: false, reason: 'aborted' });
    expect(limit.waiting).toBe(0);
    hold = () => {};
    // The queue's one place is free: the next client waits for the slot instead of a refusal.
    const next = limit.acquire({});
    await new Promise((r) => setImmediate(r));
    expect(limit.waiting).toBe(1);
    await limit.close();
    await next;
  });
});
