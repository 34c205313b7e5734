/**
 * What the diagnostics channels carry for metrics: a limiter decision's duration
 * (`durationMs`, measured only while `tollgate:decision` has a subscriber) and the
 * in-flight count of concurrency limits and shedders on `tollgate:in-flight`.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import {
  CHANNEL_NAMES,
  createConcurrency,
  createLimiter,
  createShedder,
  type DecisionMessage,
  type InFlightMessage,
  ManualClock,
  MemoryStore,
  publishDecision,
  shedDecision,
} from '@tollgate/core';
import { publishControl } from '@tollgate/core/http';
import { afterEach, describe, expect, it } from 'vitest';

const unsubscribe: (() => void)[] = [];
function listen<M>(name: string): M[] {
  const seen: M[] = [];
  const fn = (m: unknown) => seen.push(m as M);
  diagnosticsChannel.subscribe(name, fn);
  unsubscribe.push(() => diagnosticsChannel.unsubscribe(name, fn));
  return seen;
}
afterEach(() => {
  for (const u of unsubscribe.splice(0)) u();
});

const rules = [{ name: 'r', key: () => 'k', limit: 2, window: '1m' as const }];

describe('durationMs on tollgate:decision', () => {
  it('a limiter decision carries how long the engine took, sync and async, and the decision itself shows nothing of it', async () => {
    const seen = listen<DecisionMessage>(CHANNEL_NAMES.decision);
    const limiter = createLimiter({ rules, store: new MemoryStore(), clock: new ManualClock(0) });
    const d1 = limiter.consumeSync({}) as NonNullable<ReturnType<typeof limiter.consumeSync>>;
    publishDecision(d1, {}, 'l');
    publishDecision(await limiter.consume({}), {}, 'l');
    expect(seen).toHaveLength(2);
    for (const m of seen) {
      expect(typeof m.durationMs).toBe('number');
      expect(m.durationMs).toBeGreaterThanOrEqual(0);
      expect(m.durationMs).toBeLessThan(1000);
    }
    expect(Object.keys(d1)).not.toContain('durationMs');
    expect(JSON.stringify(d1)).not.toContain('duration');
  });

  it('nobody listening: no duration is measured; a control decision has none', () => {
    const limiter = createLimiter({ rules, store: new MemoryStore(), clock: new ManualClock(0) });
    const quiet = limiter.consumeSync({}) as object;
    expect(Object.getOwnPropertySymbols(quiet).map((s) => s.description)).not.toContain('tollgate.durationMs');
    const seen = listen<DecisionMessage>(CHANNEL_NAMES.decision);
    publishControl({}, 'shed', () => shedDecision({ shed: true, pressure: 1, reason: 'in-flight', retryAfterMs: 1000 }, 0));
    expect(seen).toHaveLength(1);
    expect(seen[0]?.durationMs).toBeUndefined();
  });
});

describe('tollgate:in-flight', () => {
  it('a shedder publishes its count as requests are admitted and released (once each)', () => {
    const seen = listen<InFlightMessage>(CHANNEL_NAMES.inFlight);
    const shedder = createShedder({ maxInFlight: 5 });
    try {
      const a = shedder.check({});
      const b = shedder.check({});
      if (a?.shed !== false || b?.shed !== false) throw new Error('expected both admitted');
      a.release();
      a.release();
      b.release();
      expect(seen.map((m) => m.inFlight)).toEqual([1, 2, 1, 0]);
      expect(seen[0]).toEqual({ limiter: 'shed', control: 'shed', inFlight: 1, limit: 5 });
    } finally {
      shedder.close();
    }
  });

  it('a concurrency limit publishes the requests holding its slots', async () => {
    const seen = listen<InFlightMessage>(CHANNEL_NAMES.inFlight);
    const limit = createConcurrency({ name: 'workers', max: 2, key: () => 'k' });
    try {
      const a = await limit.acquire({});
      const b = await limit.acquire({});
      if (!a?.admitted || !b?.admitted) throw new Error('expected both admitted');
      b.release();
      a.release();
      a.release();
      expect(seen.map((m) => m.inFlight)).toEqual([1, 2, 1, 0]);
      expect(seen[1]).toEqual({ limiter: 'workers', control: 'concurrency', inFlight: 2, limit: undefined });
    } finally {
      await limit.close();
    }
  });
});
