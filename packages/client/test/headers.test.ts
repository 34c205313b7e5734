/**
 * The header readers: Retry-After (RFC 9110 10.2.3), HTTP-date (RFC 9110 5.6.7),
 * Structured Fields (RFC 9651) and every RateLimit form. Malformed input is fuzzed with
 * fast-check: it must never throw and never produce a nonsensical wait.
 */
import { exhaustedWaitMs, parseHttpDate, parseRateLimit, parseRetryAfter, readXReset } from '@tollgate/client';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDictionary, parseItem, parseList } from '../src/structured-fields.js';

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);
const h = (o: Record<string, string>) => new Headers(o);

describe('parseHttpDate', () => {
  it('reads all three RFC 9110 formats to the same instant', () => {
    const t = Date.UTC(1994, 10, 6, 8, 49, 37);
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(t);
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toBe(t);
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(t);
  });

  it.each([
    '12',
    '2026-11-29T12:00:00Z',
    'Sun, 31 Feb 2026 08:49:37 GMT',
    'Sun, 06 Nov 1994 25:49:37 GMT',
    'Sun, 06 Nov 1994 08:49:37 PST',
    '',
  ])('refuses %j', (v) => expect(parseHttpDate(v)).toBeUndefined());
});

describe('parseRetryAfter', () => {
  it('delay-seconds, with optional whitespace; decimals leniently, rounded up to the ms', () => {
    expect(parseRetryAfter('3', NOW)).toBe(3000);
    expect(parseRetryAfter(' 120 ', NOW)).toBe(120_000);
    expect(parseRetryAfter('1.5', NOW)).toBe(1500);
    expect(parseRetryAfter('0.0004', NOW)).toBe(1);
  });

  it('an HTTP-date is measured against the response Date header when valid, else the client clock', () => {
    const date = new Date(NOW).toUTCString();
    const in3s = new Date(NOW + 3000).toUTCString();
    expect(parseRetryAfter(in3s, NOW, date)).toBe(3000);
    // The client clock runs 10 s ahead of the server: the Date header cancels the skew.
    expect(parseRetryAfter(in3s, NOW + 10_000, date)).toBe(3000);
    expect(parseRetryAfter(in3s, NOW + 1000, 'garbage')).toBe(2000);
  });

  it.each([null, undefined, '0', '-1', '+3', '3s', 'soon', '3, 5', 'Wed, 21 Oct 2015 07:28:00 GMT', '1e3'])(
    '%j gives no usable wait (the client falls back to its backoff)',
    (v) => expect(parseRetryAfter(v, NOW)).toBeUndefined(),
  );

  it('fuzz: never throws, and any wait it returns is a positive finite number of ms', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.option(fc.string({ maxLength: 40 })), (v, date) => {
        const ms = parseRetryAfter(v, NOW, date);
        return ms === undefined || (Number.isFinite(ms) && ms > 0 && Number.isInteger(ms));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('structured fields (RFC 9651)', () => {
  it('lists with parameters, strings with escapes, tokens, inner lists, every bare type', () => {
    const list = parseList('"user";r=42;t=18, tok;a=?1;b=1.5;c=:aGk=:;d=@1700000000;e=%"caf%c3%a9", (1 "two");x');
    expect(list).toHaveLength(3);
    expect(list?.[0]).toEqual({
      value: 'user',
      params: new Map<string, unknown>([
        ['r', 42],
        ['t', 18],
      ]),
    });
    const tok = list?.[1];
    expect(tok?.value).toEqual({ token: 'tok' });
    expect(tok?.params.get('a')).toBe(true);
    expect(tok?.params.get('b')).toBe(1.5);
    expect(Buffer.from(tok?.params.get('c') as Uint8Array).toString()).toBe('hi');
    expect(tok?.params.get('d')).toEqual(new Date(1_700_000_000_000));
    expect(tok?.params.get('e')).toBe('café');
    expect(parseList('"a \\"quoted\\" \\\\ b"')?.[0]?.value).toBe('a "quoted" \\ b');
    expect(parseList('')).toEqual([]);
    expect(parseItem('42;a=1')).toEqual({ value: 42, params: new Map([['a', 1]]) });
    expect(parseItem('42, 43')).toBeUndefined();
  });

  it('dictionaries, bare keys meaning true', () => {
    const d = parseDictionary('limit=100, remaining=42, reset=18, flag');
    expect([...(d?.entries() ?? [])].map(([k, m]) => [k, m.value])).toEqual([
      ['limit', 100],
      ['remaining', 42],
      ['reset', 18],
      ['flag', true],
    ]);
  });

  it.each(['"a",', '1234567890123456', '1.2345', '"unterminated', '"bad\\x"', 'a=1', '(1 2', '?2', ':not base64!:', 'UPPER=1'])(
    'rejects the whole field %j',
    (v) => expect(parseList(v)).toBeUndefined(),
  );

  it('a draft-10 list is not a dictionary and vice versa', () => {
    expect(parseDictionary('"user";r=1')).toBeUndefined();
    expect(parseList('limit=100, remaining=1')).toBeUndefined();
  });
});

describe('parseRateLimit', () => {
  it('draft-10: one report per policy, joined with RateLimit-Policy by name', () => {
    const reports = parseRateLimit(
      h({ ratelimit: '"user";r=0;t=18, "tenant";r=3990;t=18', 'ratelimit-policy': '"user";q=100;w=60, "tenant";q=4000;w=60' }),
      NOW,
    );
    expect(reports).toEqual([
      { source: 'draft-10', policy: 'user', remaining: 0, resetMs: 18_000, limit: 100, windowMs: 60_000 },
      { source: 'draft-10', policy: 'tenant', remaining: 3990, resetMs: 18_000, limit: 4000, windowMs: 60_000 },
    ]);
    expect(exhaustedWaitMs(reports)).toBe(18_000);
  });

  // Parameters may be renamed or added by later drafts (-11 and after): a parser reads the
  // ones it knows and ignores the rest, and an item without its `r` is skipped, not guessed.
  it('draft-10: unknown parameters are ignored, an item without r is skipped', () => {
    const reports = parseRateLimit(
      h({
        ratelimit: '"user";r=0;t=18;rq=9;x-vendor="a", "renamed";remaining=3;reset=5, "tenant";zz;r=7',
        'ratelimit-policy': '"user";q=100;w=60;qu="requests";pk=:AAAA:, "tenant";quota=9;w=1',
      }),
      NOW,
    );
    expect(reports).toEqual([
      { source: 'draft-10', policy: 'user', remaining: 0, resetMs: 18_000, limit: 100, windowMs: 60_000 },
      { source: 'draft-10', policy: 'tenant', remaining: 7, windowMs: 1000 },
    ]);
  });

  it('draft-7 dictionary, draft-6 fields and X-RateLimit are all read', () => {
    expect(parseRateLimit(h({ ratelimit: 'limit=100, remaining=0, reset=5' }), NOW)).toEqual([
      { source: 'draft-7', remaining: 0, resetMs: 5000, limit: 100 },
    ]);
    expect(parseRateLimit(h({ 'ratelimit-limit': '10, 10;w=1', 'ratelimit-remaining': '0', 'ratelimit-reset': '7' }), NOW)).toEqual([
      { source: 'draft-6', remaining: 0, resetMs: 7000, limit: 10 },
    ]);
    expect(parseRateLimit(h({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '30' }), NOW)).toEqual([
      { source: 'x-ratelimit', remaining: 0, resetMs: 30_000, limit: 60 },
    ]);
  });

  it('X-RateLimit-Reset: epoch seconds or ms only when plainly an epoch, measured against the Date header', () => {
    const date = new Date(NOW).toUTCString();
    expect(readXReset(String(NOW / 1000 + 42), NOW + 5000, date)).toBe(42_000); // skew cancelled by Date
    expect(readXReset(String(NOW / 1000 + 42), NOW, null)).toBe(42_000);
    expect(readXReset(String(NOW + 42_000), NOW, null)).toBe(42_000); // epoch ms
    expect(readXReset('60', NOW, null)).toBe(60_000); // delta seconds
    expect(readXReset(String(NOW / 1000 - 100), NOW, null)).toBe(0); // a past epoch: no wait
    expect(readXReset('500000000000', NOW, null)).toBeUndefined(); // neither plainly seconds nor ms
    expect(readXReset('-5', NOW, null)).toBeUndefined();
  });

  it('a used-up policy without t gives no wait; t=0 gives none either', () => {
    expect(exhaustedWaitMs(parseRateLimit(h({ ratelimit: '"a";r=0' }), NOW))).toBeUndefined();
    expect(exhaustedWaitMs(parseRateLimit(h({ ratelimit: '"a";r=0;t=0' }), NOW))).toBeUndefined();
    expect(exhaustedWaitMs(parseRateLimit(h({ ratelimit: '"a";r=1;t=9' }), NOW))).toBeUndefined();
  });

  it.each([
    { ratelimit: '"a";r=-1;t=5' },
    { ratelimit: '"a";r=0.5;t=5' },
    { ratelimit: '"a";r=0;t=5,' },
    { ratelimit: 'limit=1, remaining=zero' },
    { 'ratelimit-remaining': 'x', 'ratelimit-reset': '3' },
    { 'x-ratelimit-remaining': '-0', 'x-ratelimit-reset': '3' },
  ])('malformed %j is ignored', (o) => {
    expect(exhaustedWaitMs(parseRateLimit(h(o), NOW))).toBeUndefined();
  });

  const names = [
    'ratelimit',
    'ratelimit-policy',
    'ratelimit-remaining',
    'ratelimit-reset',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'date',
  ];
  const sane = (reports: ReturnType<typeof parseRateLimit>) =>
    reports.every(
      (r) =>
        Number.isSafeInteger(r.remaining) &&
        r.remaining >= 0 &&
        (r.resetMs === undefined || (Number.isFinite(r.resetMs) && r.resetMs >= 0)) &&
        (r.limit === undefined || Number.isSafeInteger(r.limit)),
    );

  it('fuzz (arbitrary strings in every field): never throws, every report is sane', () => {
    const headerValue = fc.string({ maxLength: 60 }).filter((s) => !/[\r\n\0]/.test(s));
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...names), headerValue), (o) => {
        let headers: Headers;
        try {
          headers = new Headers(o);
        } catch {
          return true; // not a value a Headers object can hold
        }
        const reports = parseRateLimit(headers, NOW);
        const wait = exhaustedWaitMs(reports);
        return sane(reports) && (wait === undefined || (Number.isFinite(wait) && wait > 0));
      }),
      { numRuns: 3000 },
    );
  });

  it('fuzz (near-valid draft-10 lists, mutated): never throws, every report is sane', () => {
    const token = fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/);
    const value = fc.oneof(fc.integer({ min: -5, max: 1e16 }), fc.double({ noNaN: false }), token, fc.constant('"x"'), fc.constant('?1'));
    const item = fc.tuple(
      fc.oneof(
        token.map((t) => `"${t}"`),
        token,
      ),
      fc.array(fc.tuple(fc.constantFrom('r', 't', 'q', 'w', 'pk'), value), { maxLength: 4 }),
    );
    const field = fc
      .array(item, { maxLength: 4 })
      .map((items) => items.map(([n, ps]) => n + ps.map(([k, v]) => `;${k}=${v}`).join('')).join(', '));
    const mutated = fc.tuple(field, fc.nat(), fc.constantFrom('', ',', ';', '=', '"', ' ', '(', '\t', '-', '.')).map(([s, at, c]) => {
      const i = s.length === 0 ? 0 : at % s.length;
      return s.slice(0, i) + c + s.slice(i);
    });
    fc.assert(
      fc.property(mutated, field, (rl, policy) => {
        const reports = parseRateLimit(h({ ratelimit: rl, 'ratelimit-policy': policy }), NOW);
        return sane(reports);
      }),
      { numRuns: 3000 },
    );
  });
});
