/**
 * Tiers, values per request and `limiter.update`: construction-time validation, the
 * synchronous path, and the identity of the specs a decision uses (the store-facing
 * behaviour is in test/conformance/values-contract.ts, on every store).
 */
import { createLimiter, ManualClock, MemoryStore, type Rule } from '@tollgate/core';
import { describe, expect, it } from 'vitest';
import { decisionOps, ruleByName } from '../src/limiter.js';

interface Req {
  k: string;
  plan?: string;
  L?: number;
}
const byK = (r: Req) => r.k;
const rule = (name: string, extra: Partial<Rule<Req>> = {}): Rule<Req> => ({ name, key: byK, limit: 5, window: '1m', ...extra });
const store = () => new MemoryStore({ clock: new ManualClock(1_000_000) });

describe('tiers: validated at construction', () => {
  const tiers = { free: [rule('free')], pro: [rule('pro')] };
  const cases: Array<[string, () => unknown, object]> = [
    ['tiers without tier', () => createLimiter<Req>({ rules: [rule('a')], tiers }), { code: 'TG_INVALID_OPTION', path: 'tier' }],
    [
      'tier without tiers',
      () => createLimiter<Req>({ rules: [rule('a')], tier: () => 'free' }),
      { code: 'TG_INVALID_OPTION', path: 'tiers' },
    ],
    [
      'tiers as an array',
      () => createLimiter<Req>({ rules: [rule('a')], tiers: [] as never, tier: () => 'x' }),
      { code: 'TG_INVALID_OPTION', path: 'tiers' },
    ],
    ['no tier at all', () => createLimiter<Req>({ tiers: {}, tier: () => 'x' }), { code: 'TG_INVALID_OPTION', path: 'tiers' }],
    ['tier not a function', () => createLimiter<Req>({ tiers, tier: 'free' as never }), { code: 'TG_INVALID_OPTION', path: 'tier' }],
    [
      'a tier name with a space',
      () => createLimiter<Req>({ tiers: { 'pro plan': [rule('p')] }, tier: () => 'x' }),
      { code: 'TG_INVALID_OPTION' },
    ],
    [
      'a bad rule in a tier, with its path',
      () => createLimiter<Req>({ tiers: { free: [rule('free')], pro: [rule('pro', { limit: 0 })] }, tier: () => 'pro' }),
      { code: 'TG_INVALID_LIMIT', path: 'tiers.pro[0] "pro".limit' },
    ],
    [
      'a tier that is not an array',
      () => createLimiter<Req>({ tiers: { free: rule('free') as never }, tier: () => 'free' }),
      { code: 'TG_NO_RULES' },
    ],
    [
      'a tier rule named like a base rule',
      () => createLimiter<Req>({ rules: [rule('free')], tiers, tier: () => 'free' }),
      { code: 'TG_DUPLICATE_RULE', path: 'tiers.free[0].name' },
    ],
    [
      'two tiers naming a rule alike',
      () => createLimiter<Req>({ tiers: { free: [rule('plan')], pro: [rule('plan')] }, tier: () => 'free' }),
      { code: 'TG_DUPLICATE_RULE', path: 'tiers.pro[0].name' },
    ],
    [
      "a group whose tiers' rules count differently",
      () =>
        createLimiter<Req>({
          tiers: { free: [rule('free', { group: 'plan' })], pro: [rule('pro', { group: 'plan', algorithm: 'token-bucket' })] },
          tier: () => 'free',
        }),
      { code: 'TG_INVALID_OPTION', path: 'tiers.pro[0].group' },
    ],
    ['no rules and no tiers', () => createLimiter<Req>({ rules: [] }), { code: 'TG_NO_RULES' }],
  ];
  for (const [what, make, error] of cases) {
    it(what, () => {
      expect(make).toThrow(expect.objectContaining(error));
    });
  }

  it('the base rules may be left out, and a tier may be empty (its requests meet only the base rules)', async () => {
    const only = createLimiter<Req>({ tiers, tier: (r) => r.plan ?? 'free', store: store() });
    expect((await only.consume({ k: 'a' })).rules.map((r) => r.name)).toEqual(['free']);
    const withEmpty = createLimiter<Req>({
      rules: [rule('base')],
      tiers: { free: [rule('free')], internal: [] },
      tier: (r) => r.plan ?? 'free',
      store: store(),
    });
    expect((await withEmpty.consume({ k: 'a', plan: 'internal' })).rules.map((r) => r.name)).toEqual(['base']);
  });

  it('a route rule may not take the name of a tier rule', () => {
    const l = createLimiter<Req>({ rules: [rule('base')], tiers, tier: () => 'free' });
    expect(() => l.extend([rule('pro')])).toThrow(expect.objectContaining({ code: 'TG_DUPLICATE_RULE', path: 'route rules[0].name' }));
  });
});

describe('values per request: validated at construction', () => {
  it('a leaky bucket with a function-valued limit leaves burst and queue to follow it', () => {
    expect(() => createLimiter<Req>({ rules: [rule('m', { algorithm: 'leaky-bucket', limit: () => 5, burst: 10 })] })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION', path: 'rules[0] "m".burst' }),
    );
    expect(() =>
      createLimiter<Req>({ rules: [rule('q', { algorithm: 'leaky-bucket', mode: 'queue', limit: () => 5, queue: 10 })] }),
    ).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION', path: 'rules[0] "q".queue' }));
    expect(() => createLimiter<Req>({ rules: [rule('m', { algorithm: 'leaky-bucket', limit: () => 5 })] })).not.toThrow();
    expect(() => createLimiter<Req>({ rules: [rule('m', { algorithm: 'leaky-bucket', burst: () => 5 })] })).not.toThrow();
  });

  it('burst stays a bucket option, function or not', () => {
    expect(() => createLimiter<Req>({ rules: [rule('w', { burst: () => 5 })] })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION' }),
    );
  });

  it('a static cost is checked against a function-valued limit per request, not at construction', () => {
    expect(() => createLimiter<Req>({ rules: [rule('c', { limit: () => 100, cost: 50 })] })).not.toThrow();
    expect(() => createLimiter<Req>({ rules: [rule('c', { limit: () => 100, cost: 0 })] })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_COST' }),
    );
  });
});

describe('the synchronous path stays synchronous', () => {
  it('with a synchronous tier and limit on an in-process store, decide answers in the same tick', () => {
    const l = createLimiter<Req>({
      rules: [rule('base', { limit: (r) => r.L ?? 5 })],
      tiers: { free: [rule('free')] },
      tier: () => 'free',
      store: store(),
    });
    const d = l.decide({ k: 'a', L: 7 });
    expect(d).not.toBeInstanceOf(Promise);
    expect(l.consumeSync({ k: 'a', L: 7 })?.rules.map((r) => [r.name, r.limit])).toEqual([
      ['base', 7],
      ['free', 5],
    ]);
  });

  it('an async tier or limit makes it a promise, and consumeSync a coded error', async () => {
    for (const l of [
      createLimiter<Req>({ tiers: { free: [rule('free')] }, tier: async () => 'free', store: store() }),
      createLimiter<Req>({ rules: [rule('base', { limit: async () => 5 })], store: store() }),
    ]) {
      const d = l.decide({ k: 'a' });
      expect(d).toBeInstanceOf(Promise);
      expect((await d).allowed).toBe(true);
      expect(() => l.consumeSync({ k: 'a' })).toThrow(expect.objectContaining({ code: 'TG_INVALID_CALLBACK_RESULT' }));
    }
  });

  it("an exception of the app's limit or tier function is the app's own (rethrown as is)", async () => {
    const boom = new Error('db down');
    const byLimit = createLimiter<Req>({
      rules: [
        rule('r', {
          limit: () => {
            throw boom;
          },
        }),
      ],
      store: store(),
    });
    await expect(byLimit.consume({ k: 'a' })).rejects.toBe(boom);
    const byTier = createLimiter<Req>({ tiers: { free: [rule('free')] }, tier: () => Promise.reject(boom), store: store() });
    await expect(byTier.consume({ k: 'a' })).rejects.toBe(boom);
  });
});

describe('the specs a decision uses', () => {
  it('a rule with plain values decides with its own spec', async () => {
    const l = createLimiter<Req>({ rules: [rule('r')], store: store() });
    const d = await l.consume({ k: 'a' });
    expect(decisionOps(d)?.[0]?.rule).toBe(l.rules[0]?.spec);
  });

  it('a dynamic rule decides with one spec per value, the same object each time, with its identity', async () => {
    const l = createLimiter<Req>({ rules: [rule('r', { limit: (r) => r.L ?? 1, algorithm: 'token-bucket' })], store: store() });
    const spec = async (L: number) => decisionOps(await l.consume({ k: 'a', L }))?.[0]?.rule;
    const a = await spec(10);
    expect(await spec(10)).toBe(a);
    const b = await spec(20);
    expect(b).not.toBe(a);
    expect(b).toMatchObject({ limit: 20, burst: 20, maxCost: 20, id: l.rules[0]?.spec.id });
    expect(await spec(10)).toBe(a);
  });

  it('ruleByName finds base, tier and route rules, as they are after an update', () => {
    const l = createLimiter<Req>({ rules: [rule('base')], tiers: { pro: [rule('pro')] }, tier: () => 'pro' });
    const route = l.extend([rule('route')]);
    expect(ruleByName(l, 'base')?.spec.limit).toBe(5);
    expect(ruleByName(l, 'pro')?.spec.name).toBe('pro');
    expect(ruleByName(l, 'route')?.spec.name).toBe('route');
    expect(ruleByName(route, 'pro')).toBe(ruleByName(l, 'pro'));
    expect(ruleByName(l, 'nope')).toBeUndefined();
    l.update('pro', { limit: 9 });
    expect(ruleByName(route, 'pro')?.spec.limit).toBe(9);
  });

  it('update keeps the storage identity, so the state survives', () => {
    const l = createLimiter<Req>({ rules: [{ name: 'r', key: byK, rate: '10/min', algorithm: 'sliding-window' }] });
    const before = l.rules[0]?.spec.id;
    l.update('r', { limit: 20 });
    expect(l.rules[0]?.spec).toMatchObject({ id: before, limit: 20, windowMs: 60_000 });
  });

  it('update of a quota rule sets its quota', () => {
    const l = createLimiter<Req>({ rules: [{ name: 'q', key: byK, quota: 100, per: 'day' }] });
    l.update('q', { limit: 200 });
    expect(l.rules[0]?.spec).toMatchObject({ limit: 200, calendar: 'day' });
  });
});

describe('rejections of dropped promises', () => {
  it('an async key that rejects, beside a later key that throws, leaves no unhandled rejection (it was left unhandled)', async () => {
    const seen: unknown[] = [];
    const listener = (reason: unknown) => seen.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const thrown = new Error('sync');
      const l = createLimiter<Req>({
        rules: [
          rule('a', { key: async () => Promise.reject(new Error('async')) }),
          rule('b', {
            key: () => {
              throw thrown;
            },
          }),
        ],
        store: store(),
      });
      await expect(l.consume({ k: 'x' })).rejects.toBe(thrown);
      await new Promise((r) => setTimeout(r, 20));
      expect(seen).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });
});

describe('operations by key see tiers and updates', () => {
  it('get and penalize find a tier rule, with the limit an update set', async () => {
    const l = createLimiter<Req>({ rules: [rule('base')], tiers: { pro: [rule('pro')] }, tier: () => 'pro', store: store() });
    await l.consume({ k: 'a' });
    expect(await l.get('pro', 'a')).toMatchObject({ limit: 5, remaining: 4 });
    l.update('pro', { limit: 8 });
    expect(await l.get('pro', 'a')).toMatchObject({ limit: 8, remaining: 7 });
    expect(await l.penalize('pro', 'a', 2)).toMatchObject({ remaining: 5 });
    expect((await l.consume({ k: 'a' })).rules[1]).toMatchObject({ name: 'pro', limit: 8, remaining: 4 });
  });
});
