/**
 * Durations and rates as people write them: `ms`-style strings and rates such as
 * '10/sec' or '5 per minute' are accepted; anything ambiguous is refused at construction
 * with a coded error that names the accepted forms (docs/algorithms.md, docs/errors.md).
 */
import { createLimiter, DURATION_UNITS, parseDuration, parseRate, readDuration, TollgateError } from '@tollgate/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

function refusal(fn: () => unknown): TollgateError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TollgateError);
    return err as TollgateError;
  }
  throw new Error('expected a TollgateError');
}

describe('durations and rates as people write them', () => {
  it("'1 minute', '10/sec', '100/hour', '1.5s' and '1w' were refused at run time", () => {
    const l = createLimiter({
      rules: [
        { name: 'a', limit: 1, window: '1 minute' },
        { name: 'b', rate: '10/sec' },
        { name: 'c', rate: '100/hour' },
        { name: 'd', limit: 1, window: '1.5s' },
        { name: 'e', limit: 1, window: '1w' },
        { name: 'f', rate: '5 per minute' },
      ],
    });
    expect(l.rules.map((r) => [r.spec.limit, r.spec.windowMs])).toEqual([
      [1, 60_000],
      [10, 1000],
      [100, 3_600_000],
      [1, 1500],
      [1, 604_800_000],
      [5, 60_000],
    ]);
  });

  it('reads every ms spelling that is not ambiguous', () => {
    const forms: [string, number][] = [
      ['250ms', 250],
      ['250 milliseconds', 250],
      ['1s', 1000],
      ['1 sec', 1000],
      ['2 seconds', 2000],
      ['.5s', 500],
      ['1.5s', 1500],
      ['1.1s', 1100],
      ['1m', 60_000],
      ['1min', 60_000],
      ['15 mins', 900_000],
      ['1 minute', 60_000],
      ['2.5 minutes', 150_000],
      ['1h', 3_600_000],
      ['2 hrs', 7_200_000],
      ['2 hours', 7_200_000],
      ['1d', 86_400_000],
      ['3 days', 259_200_000],
      ['1w', 604_800_000],
      ['2 weeks', 1_209_600_000],
    ];
    for (const [text, ms] of forms) expect(parseDuration(text), text).toBe(ms);
  });

  it('reads rates with a unit or a duration after / or per', () => {
    const forms: [string, number, number][] = [
      ['10/sec', 10, 1000],
      ['10/second', 10, 1000],
      ['100/hour', 100, 3_600_000],
      ['100/min', 100, 60_000],
      ['100/1m', 100, 60_000],
      ['5/15m', 5, 900_000],
      ['5/15 minutes', 5, 900_000],
      ['5 per minute', 5, 60_000],
      ['5 per 15 minutes', 5, 900_000],
      ['100/1.5s', 100, 1500],
      ['1000/week', 1000, 604_800_000],
    ];
    for (const [text, limit, windowMs] of forms) expect(parseRate(text), text).toEqual({ limit, windowMs });
  });

  it('refuses what is ambiguous, naming the accepted forms and why', () => {
    const cases: [unknown, RegExp][] = [
      ['1M', /month to some readers and a minute to others/],
      ['1 Minute', /Did you mean '1 minute'\?.*lower case/],
      ['1y', /a year is not a fixed length/i],
      ['2 years', /a year is not a fixed length/i],
      ['100', /Did you mean '100ms'\?.*needs a unit/],
      ['-1s', /cannot be negative/],
      ['1.5ms', /1\.5 ms.*whole milliseconds/],
      ['0.0001s', /0\.1 ms.*whole milliseconds/],
      ['0s', /more than 0 ms/],
      ['367d', /longer than 366 days/],
      ['15 minuts', /Did you mean '15 minutes'\?/],
      ['1e3s', /not a number followed by a unit/],
      ['', /not a number followed by a unit/],
      [`${'9'.repeat(1_000_000)}s`, /longer than any duration/],
      [1.5, /whole milliseconds/],
      [null, /a number or a string/],
    ];
    for (const [value, why] of cases) {
      const err = refusal(() => parseDuration(value, 'rules[0].window'));
      expect(err.code, String(value)).toBe('TG_INVALID_DURATION');
      expect(err.fix, String(value)).toMatch(why);
      // The accepted forms are named in every refusal.
      expect(err.message, String(value)).toContain("'1.5s', '15m', '1 minute', '2 hours', '1d' or '1w'");
      expect(err.message, String(value)).toMatch(/^rules\[0\]\.window: /);
    }
  });

  it('refuses a fractional, zero or misspelt rate with the nearest whole spelling', () => {
    const cases: [string, RegExp][] = [
      ['1.5 per minute', /Did you mean '3 per 2 minutes'\?/],
      ['2.5/min', /Did you mean '5\/2min'\?/],
      ['10/sek', /Did you mean '10\/sec'\?/],
      ['100/Min', /Did you mean '100\/min'\?/],
      ['5 per 15 minuts', /Did you mean '5 per 15 minutes'\?/],
      ['0/min', /at least 1/],
      ['100/1y', /year is not a fixed length/],
      ['10 / sec', /then '\/' or ' per '/],
      ['5/constructor', /'constructor' is not a unit/],
    ];
    for (const [value, why] of cases) {
      const err = refusal(() => parseRate(value));
      expect(err.code, value).toBe('TG_INVALID_RATE');
      expect(err.fix, value).toMatch(why);
      expect(err.message, value).toContain("'100/min', '10/sec', '100/hour', '5/15m' or '5 per minute'");
    }
  });

  it('scales decimals exactly: n.d<unit> is n.d × unit ms, never a float rounding off', () => {
    // Seconds take 3 decimals (1 ms each), minutes 4 (6 ms), hours 5 (36 ms).
    const steps: [string, number, number][] = [
      ['s', 1000, 3],
      ['m', 60_000, 4],
      ['h', 3_600_000, 5],
    ];
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000_000 }), fc.constantFrom(...steps), (n, [unit, per, decimals]) => {
        const step = per / 10 ** decimals;
        const ms = n * step;
        const whole = Math.floor(ms / per);
        const text = `${whole}.${String((ms - whole * per) / step).padStart(decimals, '0')}${unit}`;
        expect(readDuration(text), text).toEqual({ ms });
      }),
      { numRuns: 2000 },
    );
  });

  it('every unit in DURATION_UNITS is read, with and without a space', () => {
    const worth: [RegExp, number][] = [
      [/^(ms|msecs?|milliseconds?)$/, 1],
      [/^(s|secs?|seconds?)$/, 1000],
      [/^(m|mins?|minutes?)$/, 60_000],
      [/^(h|hrs?|hours?)$/, 3_600_000],
      [/^(d|days?)$/, 86_400_000],
      [/^(w|weeks?)$/, 604_800_000],
    ];
    const msOf = (unit: string) => worth.find(([re]) => re.test(unit))?.[1];
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.constantFrom(...DURATION_UNITS), fc.boolean(), (n, unit, space) => {
        expect(readDuration(`${n}${space ? ' ' : ''}${unit}`)).toEqual({ ms: n * (msOf(unit) as number) });
      }),
    );
  });

  it('any value at all gives a whole positive duration or rate, or a coded error: never another exception', () => {
    const texts = fc.oneof(
      fc.string(),
      fc.stringMatching(/^-?[0-9.]{0,6} ?[a-zA-Z]{0,8}$/),
      fc.stringMatching(/^[0-9.]{1,4}( per |\/)[0-9. a-zA-Z]{0,10}$/),
    );
    const values = fc.oneof(texts, fc.double(), fc.integer(), fc.constantFrom(null, undefined, {}, [], true));
    fc.assert(
      fc.property(values, (value) => {
        for (const [parse, code] of [
          [parseDuration, 'TG_INVALID_DURATION'],
          [(v: unknown) => parseRate(v).windowMs, 'TG_INVALID_RATE'],
        ] as const) {
          let ms: number | undefined;
          try {
            ms = parse(value);
          } catch (err) {
            expect(err).toBeInstanceOf(TollgateError);
            expect((err as TollgateError).code).toBe(code);
            continue;
          }
          expect(Number.isSafeInteger(ms) && (ms as number) > 0 && (ms as number) <= 366 * 86_400_000, String(value)).toBe(true);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
