/**
 * Counting by outcome (SPEC 8.6), as both adapters do it: consumed on admission, given
 * back when the response finishes with a status the rule does not count.
 */
import { EventEmitter } from 'node:events';
import { constant, createLimiter, ManualClock, MemoryStore } from '@tollgate/core';
import { countedRules, refundUncountedOnFinish } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

class FakeResponse extends EventEmitter {
  statusCode = 200;
  /** The port's `onFinish` over this response. */
  readonly onFinish = (fn: (status: number) => void) => {
    this.once('finish', () => fn(this.statusCode));
  };
}

function setup() {
  const clock = new ManualClock(1_000_000);
  const store = new MemoryStore({ clock });
  const lim = createLimiter<object>({
    rules: [
      { name: 'all', limit: 10, window: '1m' },
      { name: 'failures', limit: 10, window: '1m', skipSuccessful: true },
      {
        name: 'broken',
        limit: 10,
        window: '1m',
        countIf: () => {
          throw new Error('app bug');
        },
      },
    ],
    store,
    clock,
    defaultKey: constant('k'),
  });
  return { lim, store };
}

async function remaining(lim: ReturnType<typeof setup>['lim']): Promise<Record<string, number>> {
  const d = await lim.peek({});
  return Object.fromEntries(d.rules.map((r) => [r.name, r.remaining]));
}

describe('refundUncountedOnFinish', () => {
  it('lists only the rules whose count depends on the response', () => {
    const { lim, store } = setup();
    expect(countedRules(lim).map((r) => r.spec.name)).toEqual(['failures', 'broken']);
    return store.close();
  });

  it('refunds a 200 for skipSuccessful, keeps a 500, and a throwing countIf counts', async () => {
    const { lim, store } = setup();
    const counted = countedRules(lim);
    for (const status of [200, 500]) {
      const d = await lim.consume({});
      const res = new FakeResponse();
      refundUncountedOnFinish(lim, counted, {}, res.onFinish, d, 'test');
      res.statusCode = status;
      res.emit('finish');
      await new Promise((r) => setImmediate(r));
    }
    // peek reports what would remain after one more request: 10 - 2 - 1, and 10 - 1 - 1 after the refund.
    expect(await remaining(lim)).toEqual({ all: 7, failures: 8, broken: 7 });
    await store.close();
  });

  it('does nothing before the response finishes', async () => {
    const { lim, store } = setup();
    const d = await lim.consume({});
    refundUncountedOnFinish(lim, countedRules(lim), {}, new FakeResponse().onFinish, d, 'test');
    await new Promise((r) => setImmediate(r));
    expect(await remaining(lim)).toEqual({ all: 8, failures: 8, broken: 8 });
    await store.close();
  });
});
