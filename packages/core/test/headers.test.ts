import {
  compileHeaders,
  constant,
  createLimiter,
  type HeaderField,
  type HeaderFormatter,
  ManualClock,
  type RuleResult,
  TollgateError,
} from '@tollgate/core';
import { applyHeaders, lowerHeaderName, nextAdmission } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

function rule(over: Partial<RuleResult> & { name: string }): RuleResult {
  return { allowed: true, limit: 100, remaining: 42, windowMs: 60_000, resetMs: 17_200, retryAfterMs: 0, delayMs: 0, ...over };
}

function asRecord(fields: HeaderField[]): Record<string, string> {
  const out: Record<string, string> = {};
  applyHeaders(
    fields,
    (n) => out[n],
    (n, v) => {
      out[n] = v;
    },
  );
  return out;
}

describe('draft-10 (default)', () => {
  const format = compileHeaders()!;
  it('writes one item per rule, in order, with w and t in whole seconds rounded up', () => {
    const h = asRecord(format([rule({ name: 'user' }), rule({ name: 'tenant', limit: 4000, remaining: 3990, resetMs: 17_001 })], 0));
    expect(h['RateLimit-Policy']).toBe('"user";q=100;w=60, "tenant";q=4000;w=60');
    expect(h.RateLimit).toBe('"user";r=42;t=18, "tenant";r=3990;t=18');
  });
  it('when r is 0 on a refusal, t is the retry time (equal to Retry-After)', () => {
    const h = asRecord(format([rule({ name: 'user', allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs: 2_001 })], 0));
    expect(h.RateLimit).toBe('"user";r=0;t=3');
  });
  it('w is at least 1 for sub-second windows', () => {
    expect(asRecord(format([rule({ name: 'burst', windowMs: 250 })], 0))['RateLimit-Policy']).toBe('"burst";q=100;w=1');
  });
  it('appends to what an earlier limiter wrote instead of overwriting it', () => {
    const out: Record<string, string> = {};
    const get = (n: string) => out[n];
    const set = (n: string, v: string) => {
      out[n] = v;
    };
    applyHeaders(format([rule({ name: 'app' })], 0), get, set);
    applyHeaders(format([rule({ name: 'route', remaining: 1 })], 0), get, set);
    expect(out.RateLimit).toBe('"app";r=42;t=18, "route";r=1;t=18');
    expect(out['RateLimit-Policy']).toBe('"app";q=100;w=60, "route";q=100;w=60');
  });
  it('adds a salted partition key only when asked', () => {
    expect(format([rule({ name: 'user' })], 0, { keys: ['alice'] })[0]?.value).not.toContain('pk=');
    const withPk = compileHeaders('draft-10', { partitionKey: { salt: 'a-long-secret' } })!;
    const a = withPk([rule({ name: 'user' })], 0, { keys: ['alice'] });
    const b = withPk([rule({ name: 'user' })], 0, { keys: ['bob'] });
    const other = compileHeaders('draft-10', { partitionKey: { salt: 'another-secret' } })!([rule({ name: 'user' })], 0, {
      keys: ['alice'],
    });
    expect(a[1]?.value).toMatch(/^"user";r=42;t=18;pk=:[A-Za-z0-9+/]{16}:$/);
    expect(a[1]?.value).not.toContain('alice');
    expect(a[1]?.value).not.toBe(b[1]?.value);
    expect(a[1]?.value).not.toBe(other[1]?.value);
    expect(() => compileHeaders('draft-10', { partitionKey: { salt: 'x' } })).toThrow(TollgateError);
  });
});

describe('single-value modes describe the most restrictive rule', () => {
  const rules = [
    rule({ name: 'user', remaining: 42 }),
    rule({ name: 'tenant', limit: 4000, remaining: 7, resetMs: 30_000, windowMs: 3_600_000 }),
  ];
  it('draft-7', () => {
    expect(asRecord(compileHeaders('draft-7')!(rules, 0))).toEqual({
      'RateLimit-Policy': '4000;w=3600',
      RateLimit: 'limit=4000, remaining=7, reset=30',
    });
  });
  it('draft-6', () => {
    expect(asRecord(compileHeaders('draft-6')!(rules, 0))).toEqual({
      'RateLimit-Policy': '4000;w=3600',
      'RateLimit-Limit': '4000',
      'RateLimit-Remaining': '7',
      'RateLimit-Reset': '30',
    });
  });
  it('legacy uses Unix epoch seconds for the reset', () => {
    expect(asRecord(compileHeaders('legacy')!(rules, 1_700_000_000_500))).toEqual({
      'X-RateLimit-Limit': '4000',
      'X-RateLimit-Remaining': '7',
      'X-RateLimit-Reset': '1700000031',
    });
  });
  it('picks among every rule the request met (context.all), not only this limiter`s', () => {
    const h = asRecord(
      compileHeaders('legacy')!([rule({ name: 'route', remaining: 50 })], 0, { all: [...rules, rule({ name: 'route', remaining: 50 })] }),
    );
    expect(h['X-RateLimit-Remaining']).toBe('7');
  });
  it('combines draft-10 with legacy', () => {
    const h = asRecord(compileHeaders(['draft-10', 'legacy'])!(rules, 0));
    expect(Object.keys(h).sort()).toEqual([
      'RateLimit',
      'RateLimit-Policy',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
    ]);
  });
});

describe('headers option validation', () => {
  it('false turns headers off; true is draft-10', () => {
    expect(compileHeaders(false)).toBeUndefined();
    expect(compileHeaders(true)!([rule({ name: 'a' })], 0)[0]?.name).toBe('RateLimit-Policy');
  });
  it('rejects unknown modes, empty lists and clashing drafts', () => {
    for (const bad of ['draft-11', [], ['draft-10', 'draft-7'], ['draft-6', 'draft-7'], 42]) {
      expect(() => compileHeaders(bad as never), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'TG_INVALID_HEADERS' }));
    }
  });
});

describe('headers from a real decision', () => {
  it('t on an admitted request that took the last unit of a fixed window is the window end', async () => {
    const clock = new ManualClock(10_000);
    const l = createLimiter({ rules: [{ name: 'g', key: constant('k'), limit: 2, window: '10s', algorithm: 'fixed-window' }], clock });
    await l.consume({});
    clock.advance(2_500);
    const d = await l.consume({});
    expect(asRecord(compileHeaders()!(d.rules, d.at)).RateLimit).toBe('"g";r=0;t=8');
    clock.advance(1);
    const refused = await l.consume({});
    expect(asRecord(compileHeaders()!(refused.rules, refused.at)).RateLimit).toBe('"g";r=0;t=8');
  });
});

describe('nextAdmission: exact t when an admitted request took the last unit', () => {
  it('a drained token bucket says when the next token comes, not when the bucket is full', async () => {
    const clock = new ManualClock(0);
    const l = createLimiter({ rules: [{ name: 'tb', key: constant('k'), limit: 5, window: '10s', algorithm: 'token-bucket' }], clock });
    const first = nextAdmission(l);
    let d = await l.consume({});
    for (let i = 0; i < 4; i++) d = await l.consume({});
    expect(d.rules[0]?.remaining).toBe(0);
    expect(first.needed(d)).toBe(true);
    const next = await first.get({}, d);
    expect(next).toEqual([2000]);
    expect(asRecord(compileHeaders()!(d.rules, d.at)).RateLimit).toBe('"tb";r=0;t=10');
    expect(asRecord(compileHeaders()!(d.rules, d.at, { next })).RateLimit).toBe('"tb";r=0;t=2');
    expect(asRecord(compileHeaders('draft-6')!(d.rules, d.at, { next }))['RateLimit-Reset']).toBe('2');
    // Nothing was consumed by asking.
    clock.advance(2000);
    expect((await l.consume({})).allowed).toBe(true);
    expect((await l.consume({})).allowed).toBe(false);
  });
  it('is not needed for fixed windows, refusals, or rules with units left', async () => {
    const clock = new ManualClock(0);
    const fw = createLimiter({ rules: [{ name: 'fw', key: constant('k'), limit: 1, window: '10s', algorithm: 'fixed-window' }], clock });
    expect(nextAdmission(fw).needed(await fw.consume({}))).toBe(false);
    const sw = createLimiter({ rules: [{ name: 'sw', key: constant('k'), limit: 2, window: '10s' }], clock });
    const n = nextAdmission(sw);
    expect(n.needed(await sw.consume({}))).toBe(false);
    expect(n.needed(await sw.consume({}))).toBe(true);
    expect(n.needed(await sw.consume({}))).toBe(false);
  });
});

describe('draft-10 policy items rendered once per rule', () => {
  it('a formatter shared by stacks that name different rules alike renders each as it is', () => {
    const format = compileHeaders('draft-10') as HeaderFormatter;
    const rule = (limit: number, windowMs: number): RuleResult => ({
      name: 'burst',
      allowed: true,
      limit,
      remaining: limit - 1,
      windowMs,
      resetMs: windowMs,
      retryAfterMs: 0,
      delayMs: 0,
    });
    const policy = (r: RuleResult[]) => format(r, 0).find((f) => f.name === 'RateLimit-Policy')?.value;
    expect(policy([rule(5, 60_000)])).toBe('"burst";q=5;w=60');
    expect(policy([rule(10, 60_000)])).toBe('"burst";q=10;w=60');
    expect(policy([rule(10, 1_000)])).toBe('"burst";q=10;w=1');
    expect(policy([rule(5, 60_000)])).toBe('"burst";q=5;w=60');
    expect(policy([rule(5, 60_000), { ...rule(7, 3_600_000), name: 'hourly' }])).toBe('"burst";q=5;w=60, "hourly";q=7;w=3600');
  });
});

describe('the one-rule draft-10 path', () => {
  it('writes what the stack path writes for that rule, after its cached texts were made for another limit', () => {
    const format = compileHeaders('draft-10') as HeaderFormatter;
    const state = (r: RuleResult[], next?: (number | undefined)[]) =>
      format(r, 0, next === undefined ? undefined : { next }).find((f) => f.name === 'RateLimit')?.value;
    expect(state([rule({ name: 'ip', limit: 5, remaining: 4, resetMs: 59_001 })])).toBe('"ip";r=4;t=60');
    expect(state([rule({ name: 'ip', limit: 9, remaining: -2, resetMs: 1 })])).toBe('"ip";r=0;t=1');
    // Last unit taken: `t` from nextAdmission when given, as in a stack.
    expect(state([rule({ name: 'ip', remaining: 0, resetMs: 60_000 })], [2_500])).toBe('"ip";r=0;t=3');
    const two = state([rule({ name: 'ip', remaining: 0, resetMs: 60_000 }), rule({ name: 'day' })], [2_500, undefined]);
    expect(two?.split(', ')[0]).toBe('"ip";r=0;t=3');
  });

  it('header names are looked up lower-cased, the same string for a lower-case name', () => {
    expect(lowerHeaderName('RateLimit')).toBe('ratelimit');
    expect(lowerHeaderName('RateLimit-Policy')).toBe('ratelimit-policy');
    expect(lowerHeaderName('X-RateLimit-Reset')).toBe('x-ratelimit-reset');
    expect(lowerHeaderName('X-RateLimit-Reset')).toBe('x-ratelimit-reset');
    expect(lowerHeaderName('retry-after')).toBe('retry-after');
  });
});
