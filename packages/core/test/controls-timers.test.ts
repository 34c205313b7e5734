import { EventEmitter } from 'node:events';
import { ManualClock, ManualTimers } from '@tollgate/core';
import { hold, onceDone } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

class FakeResponse extends EventEmitter {
  writableEnded = false;
  destroyed = false;
}

describe('ManualTimers', () => {
  it('runs due timers in due order with the clock at each due time, and none early', async () => {
    const clock = new ManualClock(1000);
    const timers = new ManualTimers(clock);
    const ran: Array<[string, number]> = [];
    timers.setTimeout(() => ran.push(['b', clock.now()]), 500);
    timers.setTimeout(() => ran.push(['a', clock.now()]), 200);
    timers.setTimeout(() => ran.push(['c', clock.now()]), 500);
    await timers.advance(199);
    expect(ran).toEqual([]);
    await timers.advance(400);
    expect(ran).toEqual([
      ['a', 1200],
      ['b', 1500],
      ['c', 1500],
    ]);
    expect(clock.now()).toBe(1599);
    expect(timers.pending).toBe(0);
  });

  it('runs timers scheduled by a timer within the same advance, and skips cleared ones', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const ran: number[] = [];
    const h = timers.setTimeout(() => ran.push(-1), 10);
    timers.setTimeout(() => timers.setTimeout(() => ran.push(clock.now()), 100), 50);
    timers.clearTimeout(h);
    await timers.advance(1000);
    expect(ran).toEqual([150]);
  });
});

describe('hold', () => {
  it('resolves true after the delay and leaves no timer or listener', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const res = new FakeResponse();
    let result: boolean | undefined;
    void hold(res, 5000, timers).then((r) => {
      result = r;
    });
    await timers.advance(4999);
    expect(result).toBeUndefined();
    await timers.advance(1);
    expect(result).toBe(true);
    expect(res.listenerCount('close')).toBe(0);
    expect(timers.pending).toBe(0);
  });

  it('resolves false as soon as the connection closes and clears its timer', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const res = new FakeResponse();
    const p = hold(res, 5000, timers);
    expect(timers.pending).toBe(1);
    res.destroyed = true;
    res.emit('close');
    expect(await p).toBe(false);
    expect(timers.pending).toBe(0);
  });

  it('resolves false at once for a response whose connection is already gone, true for no delay', async () => {
    const res = new FakeResponse();
    expect(await hold(res, 0)).toBe(true);
    res.destroyed = true;
    expect(await hold(res, 100)).toBe(false);
  });
});

describe('onceDone', () => {
  it('runs once on finish then close, and the returned function does not run it again', () => {
    const res = new FakeResponse();
    let n = 0;
    const done = onceDone(res, () => n++);
    res.emit('finish');
    res.emit('close');
    done();
    expect(n).toBe(1);
    expect(res.listenerCount('close') + res.listenerCount('finish')).toBe(0);
  });

  it('runs on close alone (aborted request)', () => {
    const res = new FakeResponse();
    let n = 0;
    onceDone(res, () => n++);
    res.emit('close');
    expect(n).toBe(1);
  });
});
