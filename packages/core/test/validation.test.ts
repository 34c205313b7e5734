/**
 * Bad input (SPEC 2, 12): bad configuration fails at construction with a stable code and a
 * message saying what was expected, what was received and how to fix it; odd keys and odd
 * costs at request time give a well-defined decision and never bypass a limit.
 */
import {
  constant,
  createLimiter,
  type ErrorCode,
  ManualClock,
  MemoryStore,
  parseDuration,
  parseRate,
  type Rule,
  sanitizeKey,
  TollgateError,
} from '@tollgate/core';
import { describe, expect, it } from 'vitest';

/** Runs `fn`, expects a TollgateError with `code` and a complete expected/received/fix message. */
function expectConfigError(fn: () => unknown, code: ErrorCode, what: string): TollgateError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught, `${what}: throws`).toBeInstanceOf(TollgateError);
  const err = caught as TollgateError;
  expect(err.code, what).toBe(code);
  expect(err.expected, `${what}: expected`).toBeTruthy();
  expect(err.received, `${what}: received`).toBeTruthy();
  expect(err.fix, `${what}: fix`).toBeTruthy();
  expect(err.message, what).toContain(`expected ${err.expected}`);
  expect(err.message, what).toContain(`received ${err.received}`);
  expect(err.message, what).toContain(err.fix as string);
  // A message never reproduces a huge input.
  expect(err.message.length, what).toBeLessThan(1000);
  return err;
}

const build = (rule: Record<string, unknown>) => () =>
  createLimiter({ rules: [{ name: 'r', key: constant('k'), ...rule } as Rule], store: new MemoryStore({ sweepIntervalMs: 0 }) });

const BAD_NUMBERS: readonly [string, unknown][] = [
  ['a numeric string', '10'],
  ['a non-numeric string', 'ten'],
  ['negative', -5],
  ['zero', 0],
  ['fractional', 1.5],
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['-Infinity', Number.NEGATIVE_INFINITY],
  ['null', null],
  ['an object', { n: 1 }],
  ['beyond 2^53', 2 ** 60],
];

describe('bad configuration fails at construction', () => {
  for (const [label, value] of BAD_NUMBERS) {
    it(`limit ${label} → TG_INVALID_LIMIT`, () => {
      const err = expectConfigError(build({ limit: value, window: '1s' }), 'TG_INVALID_LIMIT', `limit ${label}`);
      expect(err.path).toContain('limit');
    });
    it(`window ${label} → TG_INVALID_DURATION`, () => {
      expectConfigError(build({ limit: 1, window: value }), 'TG_INVALID_DURATION', `window ${label}`);
    });
    it(`burst, queue, quota ${label} → TG_INVALID_LIMIT`, () => {
      expectConfigError(build({ algorithm: 'token-bucket', limit: 5, window: '1s', burst: value }), 'TG_INVALID_LIMIT', 'burst');
      expectConfigError(
        build({ algorithm: 'leaky-bucket', mode: 'queue', limit: 5, window: '1s', queue: value }),
        'TG_INVALID_LIMIT',
        'queue',
      );
      if (value !== null) expectConfigError(build({ quota: value, per: 'day' }), 'TG_INVALID_LIMIT', 'quota');
    });
    it(`static cost ${label} → TG_INVALID_COST`, () => {
      expectConfigError(build({ limit: 100, window: '1s', cost: value }), 'TG_INVALID_COST', `cost ${label}`);
    });
    it(`blockFor ${label} → TG_INVALID_DURATION`, () => {
      expectConfigError(build({ limit: 1, window: '1s', blockFor: value }), 'TG_INVALID_DURATION', `blockFor ${label}`);
    });
  }

  it('a static cost larger than the rule can ever admit → TG_INVALID_COST', () => {
    expectConfigError(build({ limit: 5, window: '1s', cost: 6 }), 'TG_INVALID_COST', 'cost > limit');
    expectConfigError(build({ algorithm: 'token-bucket', limit: 50, window: '1s', burst: 5, cost: 6 }), 'TG_INVALID_COST', 'cost > burst');
    expectConfigError(
      build({ algorithm: 'leaky-bucket', mode: 'queue', limit: 50, window: '1s', queue: 5, cost: 6 }),
      'TG_INVALID_COST',
      'cost > queue',
    );
    // At the bound it is fine.
    expect(build({ algorithm: 'token-bucket', limit: 50, window: '1s', burst: 5, cost: 5 })).not.toThrow();
  });

  it('unknown algorithm names → TG_UNKNOWN_ALGORITHM', () => {
    for (const algorithm of ['leaky', 'Token-Bucket', 'gcra', '', 42, null]) {
      expectConfigError(build({ limit: 1, window: '1s', algorithm }), 'TG_UNKNOWN_ALGORITHM', `algorithm ${String(algorithm)}`);
    }
  });

  it('unknown option keys → TG_UNKNOWN_OPTION (rule, limiter and store)', () => {
    const err = expectConfigError(build({ limit: 1, window: '1s', limt: 1 }), 'TG_UNKNOWN_OPTION', 'rule.limt');
    expect(err.received).toContain('limt');
    expectConfigError(() => createLimiter({ rules: [{ name: 'r', rate: '1/s' }], rule: [] } as never), 'TG_UNKNOWN_OPTION', 'limiter.rule');
    expectConfigError(() => new MemoryStore({ max: 1 } as never), 'TG_UNKNOWN_OPTION', 'store.max');
  });

  it('options on the wrong algorithm → TG_INVALID_OPTION', () => {
    expectConfigError(build({ limit: 1, window: '1s', burst: 2 }), 'TG_INVALID_OPTION', 'burst on sliding-window');
    expectConfigError(build({ algorithm: 'token-bucket', limit: 1, window: '1s', align: 'clock' }), 'TG_INVALID_OPTION', 'align');
    expectConfigError(build({ algorithm: 'fixed-window', limit: 1, window: '1s', align: 'sometimes' }), 'TG_INVALID_OPTION', 'align value');
    expectConfigError(build({ algorithm: 'leaky-bucket', limit: 1, window: '1s', mode: 'drip' }), 'TG_INVALID_OPTION', 'mode value');
    expectConfigError(build({ limit: 1, window: '1s', rate: '1/s' }), 'TG_INVALID_OPTION', 'rate and limit');
    expectConfigError(build({ limit: 1 }), 'TG_INVALID_OPTION', 'limit without window');
    expectConfigError(build({ quota: 5, per: 'week' }), 'TG_INVALID_OPTION', 'per week');
    expectConfigError(build({ limit: 1, window: '1s', dryRun: 'yes' }), 'TG_INVALID_OPTION', 'dryRun string');
  });

  it('countRejected on a leaky queue: the message names what was received, once', () => {
    const err = expectConfigError(
      build({ algorithm: 'leaky-bucket', mode: 'queue', limit: 1, window: '1s', countRejected: true }),
      'TG_INVALID_OPTION',
      'countRejected on a leaky queue',
    );
    expect(err.received).toBe('countRejected on a leaky-bucket queue');
    expect(err.message).not.toContain('not a rule that is not');
  });

  it('duplicate rule names → TG_DUPLICATE_RULE, also between app-level and route rules', () => {
    const rules = [
      { name: 'user', rate: '10/s' as const },
      { name: 'user', rate: '100/min' as const },
    ];
    expectConfigError(() => createLimiter({ rules }), 'TG_DUPLICATE_RULE', 'duplicate');
    const l = createLimiter({ rules: [{ name: 'user', rate: '10/s' }], store: new MemoryStore({ sweepIntervalMs: 0 }) });
    expectConfigError(() => l.extend([{ name: 'user', rate: '1/s' }]), 'TG_DUPLICATE_RULE', 'extend duplicate');
  });

  it('no rules, bad names, bad keys → TG_NO_RULES, TG_INVALID_OPTION, TG_INVALID_KEY', () => {
    expectConfigError(() => createLimiter({ rules: [] }), 'TG_NO_RULES', 'empty rules');
    expectConfigError(() => createLimiter({ rules: 'r' as never }), 'TG_NO_RULES', 'string rules');
    expectConfigError(() => createLimiter({ rules: [{ name: '', rate: '1/s' }] }), 'TG_INVALID_OPTION', 'empty name');
    expectConfigError(() => createLimiter({ rules: [{ name: 'a"b', rate: '1/s' }] }), 'TG_INVALID_OPTION', 'quote in name');
    expectConfigError(() => createLimiter({ rules: [{ name: 'r', rate: '1/s', key: 'ip' as never }] }), 'TG_INVALID_KEY', 'key string');
  });
});

describe('durations and rates (SPEC 2)', () => {
  it('accepts every SPEC duration form', () => {
    const forms: [string | number, number][] = [
      ['250ms', 250],
      ['1s', 1000],
      ['10s', 10_000],
      ['1m', 60_000],
      ['1min', 60_000],
      ['15m', 900_000],
      ['1h', 3_600_000],
      ['1d', 86_400_000],
      [1500, 1500],
    ];
    for (const [input, ms] of forms) expect(parseDuration(input), String(input)).toBe(ms);
  });

  it('accepts every SPEC rate form', () => {
    const forms: [string, number, number][] = [
      ['100/1m', 100, 60_000],
      ['100/min', 100, 60_000],
      ['5/15m', 5, 900_000],
      ['10/s', 10, 1000],
      ['1000/h', 1000, 3_600_000],
      ['500000/d', 500_000, 86_400_000],
    ];
    for (const [input, limit, windowMs] of forms) expect(parseRate(input), input).toEqual({ limit, windowMs });
  });

  it('rejects bad durations with TG_INVALID_DURATION', () => {
    for (const bad of [
      '',
      'abc',
      '10',
      '1.5ms',
      '-1s',
      '0s',
      '1M',
      '1y',
      's',
      '1 fortnight',
      '2y',
      // Only ms's spellings, lower case, with no space around the whole.
      '1 Minute',
      '1sek',
      ' 1s',
      '1s ',
      0,
      -1,
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      null,
      {},
    ]) {
      expectConfigError(() => parseDuration(bad), 'TG_INVALID_DURATION', `duration ${String(bad)}`);
    }
  });

  it('rejects bad rates with TG_INVALID_RATE', () => {
    for (const bad of [
      '',
      '100',
      '/min',
      '0/min',
      '-1/min',
      '1.5/min',
      '1.5 per minute',
      '100/0m',
      '100/1y',
      '100/',
      'abc',
      '100/min/s',
      '100/sek',
      '100/Min',
      '100 per',
      '100 / min',
      ' 100/min',
      100,
      null,
    ]) {
      expectConfigError(() => parseRate(bad), 'TG_INVALID_RATE', `rate ${String(bad)}`);
    }
    expectConfigError(build({ rate: '100/fortnight' }), 'TG_INVALID_RATE', 'rule rate');
  });
});

describe('odd input at request time gives a well-defined decision', () => {
  const clock = new ManualClock(1_000_000);
  const make = () => {
    const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
    const l = createLimiter<{ k: string; n?: unknown }>({
      rules: [
        {
          name: 'r',
          key: (req) => req.k,
          algorithm: 'fixed-window',
          limit: 1,
          window: '1h',
          cost: (req) => ('n' in req ? req.n : 1) as number,
        },
      ],
      store,
      clock,
    });
    return { store, l };
  };
  const huge = (c: string) => 'x'.repeat(1024 * 1024 - 1) + c;
  const KEYS: [string, string][] = [
    ['empty', ''],
    ['1 MB', huge('a')],
    ['control characters', '\u0000\u0001\n\r\t\u007f'],
    ['braces (Redis Cluster hash tags)', '{slot}user'],
    ['spaces', 'a b'],
    ['non-ASCII', 'ünïcødé-用户-🙂'],
    ['a lone high surrogate', 'a\uD800b'],
    ['a lone low surrogate', 'a\uDC00b'],
    ['a leading #', '#notahash'],
  ];

  for (const [label, key] of KEYS) {
    it(`key ${label}: stored bounded, counted, limited`, async () => {
      const s = sanitizeKey(key);
      expect(s.length).toBeLessThanOrEqual(128);
      expect(s).toMatch(/^[\x21-\x7a|~]+$/);
      const { store, l } = make();
      // What the store receives is the bounded form, never the raw key.
      const ops = l.resolve({ k: key });
      expect(ops.map((op) => op.key)).toEqual([s]);
      expect((await l.consume({ k: key })).allowed).toBe(true);
      const d = await l.consume({ k: key });
      expect(d.allowed).toBe(false);
      expect(d.retryAfterMs).toBeGreaterThan(0);
      expect(store.size).toBe(1);
      await store.close();
    });
  }

  it('different odd keys never share a counter (no collisions)', async () => {
    const keys = [
      ...KEYS.map(([, k]) => k),
      huge('b'),
      huge('c'),
      'a\uD801b',
      'a\uFFFDb',
      sanitizeKey(huge('a')), // a client sending the literal hash of another key
      '\u00e9',
      'e\u0301',
    ];
    expect(new Set(keys.map(sanitizeKey)).size).toBe(keys.length);
    const { store, l } = make();
    for (const k of keys) expect((await l.consume({ k })).allowed).toBe(true);
    expect(store.size).toBe(keys.length);
    await store.close();
  });

  it('plain keys are kept verbatim, so they stay readable in the store', () => {
    for (const k of ['192.0.2.1', '2001:db8::/56', 'user:42', 'tenant|acme~eu']) expect(sanitizeKey(k)).toBe(k);
  });

  it('a cost function returning a non-number is a coded error, never free', async () => {
    for (const n of ['1', null]) {
      const { store, l } = make();
      await expect(l.consume({ k: 'a', n })).rejects.toMatchObject({ code: 'TG_INVALID_CALLBACK_RESULT' });
      await store.close();
    }
  });

  it('a cost function returning NaN, a negative or Infinity is refused, never free', async () => {
    for (const n of [Number.NaN, -1, Number.POSITIVE_INFINITY]) {
      const { store, l } = make();
      const d = await l.consume({ k: 'a', n });
      expect(d.allowed, String(n)).toBe(false);
      expect(d.rules[0]?.reason).toBe('cost_exceeds_limit');
      expect(d.retryAfterMs).toBe(0);
      await store.close();
    }
  });

  it('a fractional cost from a function is rounded up (never undercharged)', async () => {
    const { store, l } = make();
    const d = await l.consume({ k: 'a', n: 0.5 });
    expect(d.allowed).toBe(true);
    expect(d.rules[0]?.remaining).toBe(0);
    await store.close();
  });
});

describe('TollgateError', () => {
  it('instanceof works for errors from a duplicate install (Symbol.for brand)', () => {
    const brand = Symbol.for('tollgate.error');
    const foreign = Object.assign(new Error('from another copy'), { code: 'TG_INVALID_LIMIT', [brand]: true });
    expect(foreign instanceof TollgateError).toBe(true);
    expect(new Error('plain') instanceof TollgateError).toBe(false);
    expect(Object.assign(new Error('x'), { [brand]: 'yes' }) instanceof TollgateError).toBe(false);
    expect((null as unknown) instanceof TollgateError).toBe(false);
    const own = new TollgateError('TG_STORE_CLOSED', 'closed');
    expect(own instanceof TollgateError).toBe(true);
    expect(own instanceof Error).toBe(true);
    expect(own.name).toBe('TollgateError');
  });
});
