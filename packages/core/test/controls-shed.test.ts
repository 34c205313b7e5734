import { createShedder, ManualClock, shedRefusal } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

type Req = { tenant?: string; priority?: number };

describe('load shedding (SPEC 8.4)', () => {
  it('sheds at maxInFlight with 503 and Retry-After, and admits again after a release', () => {
    const shedder = createShedder<Req>({ maxInFlight: 2, retryAfter: '3s' });
    const a = shedder.check({});
    const b = shedder.check({});
    const c = shedder.check({});
    expect(a?.shed).toBe(false);
    expect(b?.shed).toBe(false);
    expect(c).toMatchObject({ shed: true, reason: 'in-flight', retryAfterMs: 3000 });
    if (c?.shed) {
      const r = shedRefusal(c);
      expect(r.status).toBe(503);
      expect(r.headers).toContainEqual(['Retry-After', '3']);
      expect(r.body.type).toBe('https://iana.org/assignments/http-problem-types#temporary-reduced-capacity');
    }
    if (a && !a.shed) {
      a.release();
      a.release();
    }
    expect(shedder.inFlight).toBe(1);
    expect(shedder.check({})?.shed).toBe(false);
    shedder.close();
  });

  it('lower priorities are shed first', () => {
    const shedder = createShedder<Req>({ maxInFlight: 10, headroom: 0.2, priority: (r) => r.priority ?? 1 });
    for (let i = 0; i < 8; i++) expect(shedder.check({ priority: 1 })?.shed).toBe(false);
    // pressure 0.8: priority 0 (threshold 0.8) is shed, 0.5 (0.9) and 1 (1.0) pass
    expect(shedder.check({ priority: 0 })?.shed).toBe(true);
    expect(shedder.check({ priority: 0.5 })?.shed).toBe(false);
    // pressure 0.9: 0.5 is now shed, 1 passes, then at 1.0 everything is shed
    expect(shedder.check({ priority: 0.5 })?.shed).toBe(true);
    expect(shedder.check({ priority: 1 })?.shed).toBe(false);
    expect(shedder.check({ priority: 1 })?.shed).toBe(true);
    // garbage priorities shed first
    expect(shedder.check({ priority: Number.NaN })?.shed).toBe(true);
  });

  it('sheds on event-loop delay from the supplied source, lowest priority first', () => {
    let lag = 0;
    const shedder = createShedder<Req>({
      maxEventLoopDelay: 100,
      priority: (r) => r.priority ?? 1,
      loopDelay: { delayMs: () => lag, close: () => {} },
    });
    expect(shedder.check({ priority: 0 })?.shed).toBe(false);
    lag = 85;
    expect(shedder.check({ priority: 0 })).toMatchObject({ shed: true, reason: 'event-loop-delay' });
    expect(shedder.check({ priority: 1 })?.shed).toBe(false);
    lag = 100;
    expect(shedder.check({ priority: 1 })?.shed).toBe(true);
  });

  it('measures the real event loop when only maxEventLoopDelay is given, and close stops it', () => {
    const shedder = createShedder({ maxEventLoopDelay: '1s' });
    expect(shedder.check({})?.shed).toBe(false);
    expect(shedder.pressure()).toBeLessThan(1);
    shedder.close();
  });

  it('fair shedding: one tenant floods, thirty small tenants keep at least 95% success, the big one is shed', () => {
    const clock = new ManualClock(0);
    const shedder = createShedder<Req>({ maxInFlight: 100, tenant: (r) => r.tenant, clock });
    const SERVICE = 50; // ms each admitted request runs
    const THINK = 10; // ms a small tenant waits before its next request
    const completions = new Map<number, Array<() => void>>();
    const small = { sent: 0, ok: 0 };
    const big = { sent: 0, ok: 0 };
    const nextSmall = new Map<number, string[]>();
    for (let i = 0; i < 30; i++) {
      const at = (i * 7) % 60;
      nextSmall.set(at, [...(nextSmall.get(at) ?? []), `small-${i}`]);
    }
    const schedule = (map: Map<number, unknown[]>, at: number, v: unknown) => map.set(at, [...(map.get(at) ?? []), v]);
    for (let t = 0; t <= 10_000; t++) {
      clock.set(t);
      for (const done of completions.get(t) ?? []) done();
      completions.delete(t);
      // The big tenant keeps 20 new requests coming every millisecond.
      for (let i = 0; i < 20; i++) {
        big.sent++;
        const o = shedder.check({ tenant: 'big' });
        if (o && !o.shed) {
          big.ok++;
          schedule(completions as Map<number, unknown[]>, t + SERVICE, o.release);
        }
      }
      for (const tenant of nextSmall.get(t) ?? []) {
        small.sent++;
        const o = shedder.check({ tenant });
        if (o && !o.shed) {
          small.ok++;
          schedule(completions as Map<number, unknown[]>, t + SERVICE, o.release);
          schedule(nextSmall as Map<number, unknown[]>, t + SERVICE + THINK, tenant);
        } else schedule(nextSmall as Map<number, unknown[]>, t + THINK, tenant);
      }
      nextSmall.delete(t);
      expect(shedder.inFlight).toBeLessThanOrEqual(100);
    }
    expect(small.sent).toBeGreaterThan(4000);
    expect(small.ok / small.sent).toBeGreaterThanOrEqual(0.95);
    // The flood is mostly shed, yet the big tenant still gets work done (shedding is not a ban).
    expect(big.ok / big.sent).toBeLessThan(0.1);
    expect(big.ok).toBeGreaterThan(0);
  });

  it('without tenants the same flood starves the small clients (the fairness test can fail)', () => {
    const shedder = createShedder<Req>({ maxInFlight: 40 });
    for (let i = 0; i < 40; i++) shedder.check({ tenant: 'big' });
    expect(shedder.check({ tenant: 'small-1' })?.shed).toBe(true);
  });

  it('rejects bad options with stable codes', () => {
    expect(() => createShedder({})).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => createShedder({ maxInFlight: 0 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_LIMIT' }));
    expect(() => createShedder({ maxInFlight: 1, headroom: 0.3 })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => createShedder({ maxInFlight: 1, tenant: 'x' as never })).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
    expect(() => createShedder({ maxInFlight: 1, maxInflight: 1 } as never)).toThrow(
      expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }),
    );
  });
});
