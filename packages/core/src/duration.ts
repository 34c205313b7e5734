/**
 * Durations and rates as people write them (docs/algorithms.md, "Durations and rates").
 *
 * A duration is a number of milliseconds or a string in the grammar of the `ms` package
 * (`'250ms'`, `'1.5s'`, `'15m'`, `'1 minute'`, `'2 hours'`, `'1d'`, `'1w'`), narrowed to
 * what cannot be misread: lower-case units (`'1M'` is a month to many readers and a
 * minute to `ms`), no years (a year is not a fixed length), no bare numeric strings
 * (`'100'`: ms or seconds?), no negatives, and whole milliseconds only. `ms` decides which
 * strings are durations and what each unit is worth; the number is then scaled in exact
 * decimal arithmetic, so `'1.1s'` is 1100 ms and not 1100.0000000000002.
 *
 * A rate is `"<limit>/<period>"` or `"<limit> per <period>"`, the period a unit
 * (`'100/min'`, `'10/sec'`, `'100/hour'`, `'5 per minute'`) or a duration (`'5/15m'`,
 * `'5 per 15 minutes'`); the limit is a whole count.
 */
import ms from 'ms';
import { configError, describe } from './errors.js';
import { closest } from './suggest.js';

/** The units a duration may carry, in lower case: `ms`'s units less the years. */
export const DURATION_UNITS = [
  'ms',
  'msec',
  'msecs',
  'millisecond',
  'milliseconds',
  's',
  'sec',
  'secs',
  'second',
  'seconds',
  'm',
  'min',
  'mins',
  'minute',
  'minutes',
  'h',
  'hr',
  'hrs',
  'hour',
  'hours',
  'd',
  'day',
  'days',
  'w',
  'week',
  'weeks',
] as const;

/** A unit of a duration: `'ms'`, `'s'`, `'sec'`, `'m'`, `'min'`, `'minute'`, `'h'`, `'hour'`, `'d'`, `'w'`, ... */
export type DurationUnit = (typeof DURATION_UNITS)[number];

/** A duration written with a unit, with or without a space: `'250ms'`, `'1.5s'`, `'15m'`, `'1 minute'`, `'2 hours'`. */
export type DurationString = `${number}${DurationUnit}` | `${number} ${DurationUnit}`;

/**
 * A duration: whole milliseconds, or a string with a unit such as `'250ms'`, `'1.5s'`,
 * `'15m'`, `'1 minute'`, `'2 hours'`, `'1d'`, `'1w'`. A misspelt unit is a type error.
 * @example window: '15m'
 * @example blockFor: '1 hour'
 */
export type Duration = number | DurationString;

/** What follows the `/` or `per` of a rate: a unit (`'min'`, `'hour'`) or a duration (`'15m'`). */
export type RatePeriod = DurationUnit | DurationString;

/**
 * A rate: a whole count per unit or duration.
 * @example rate: '100/min'
 * @example rate: '10/sec'
 * @example rate: '5/15m'
 * @example rate: '5 per minute'
 */
export type Rate = `${number}/${RatePeriod}` | `${number} per ${RatePeriod}`;

/** Largest duration accepted (366 days): no rate limit needs a longer window or block. */
const MAX_DURATION_MS = 366 * 86_400_000;

const UNIT_LIST = 'ms, s (sec, second), m (min, minute), h (hr, hour), d (day), w (week), singular or plural';
const DURATION_FORMS = `a positive whole number of milliseconds (at most 366 days), or a string with a unit such as '250ms', '1.5s', '15m', '1 minute', '2 hours', '1d' or '1w' (units: ${UNIT_LIST})`;
const RATE_FORMS =
  "a rate '<count>/<period>' or '<count> per <period>' with a positive whole count and a unit or duration as the period, such as '100/min', '10/sec', '100/hour', '5/15m' or '5 per minute'";

/** How a duration string reads: its milliseconds (0 or more), or why it cannot be read. */
export type DurationReading = { ms: number } | { problem: string; suggestion?: string };

/** The parts of a string `ms` accepted: sign, whole digits, decimals, unit. */
const PARTS_RE = /^(-?)(\d*)(?:\.(\d+))? *([a-z]*)$/i;
const YEAR_UNITS = new Set(['y', 'yr', 'yrs', 'year', 'years']);

/**
 * Reads a duration string to whole milliseconds (0 included), or says why it cannot,
 * with the nearest accepted spelling where one is close. `parseDuration` and the CLI's
 * times are both built on it.
 * @example readDuration('1.5s') // { ms: 1500 }
 * @example readDuration('15 minuts') // { problem: ..., suggestion: '15 minutes' }
 */
export function readDuration(text: string): DurationReading {
  const parsed = text.length > 0 && text.length <= 100 ? (ms(text as ms.StringValue) as number | undefined) : undefined;
  const parts = PARTS_RE.exec(text);
  if (parsed === undefined || Number.isNaN(parsed) || parts === null) return unreadable(text);
  const [, sign, whole = '', decimals = '', unit = ''] = parts;
  if (unit === '') {
    return { problem: 'a string needs a unit (is it milliseconds or seconds?)', suggestion: `${text}ms` };
  }
  if (sign === '-') return { problem: 'a duration cannot be negative' };
  if (unit === 'M') {
    return { problem: "'M' is a month to some readers and a minute to others: write 'm' for minutes, or a calendar quota (per: 'month')" };
  }
  if (unit !== unit.toLowerCase()) {
    return {
      problem: 'units are written in lower case',
      ...(YEAR_UNITS.has(unit.toLowerCase()) ? {} : { suggestion: `${text.slice(0, text.length - unit.length)}${unit.toLowerCase()}` }),
    };
  }
  if (YEAR_UNITS.has(unit)) {
    return { problem: "a year is not a fixed length; write '365d', or use a calendar quota (per: 'month')" };
  }
  // Exact decimal scaling: digits × unit ÷ 10^decimals must be a whole number of ms.
  const unitMs = BigInt(ms(`1${unit}` as ms.StringValue));
  const scale = 10n ** BigInt(decimals.length);
  const product = BigInt(`${whole}${decimals}` || '0') * unitMs;
  if (product % scale !== 0n) {
    return { problem: `it comes to ${Number(product) / Number(scale)} ms, and durations are whole milliseconds` };
  }
  return { ms: Number(product / scale) };
}

function unreadable(text: string): DurationReading {
  // ms reads at most 100 characters; nothing longer is worth a suggestion.
  if (text.length > 100) return { problem: 'it is longer than any duration written with a unit' };
  const m = /^(-?\d*\.?\d+)( *)([a-z]+)$/i.exec(text);
  let near = m ? closest(m[3], DURATION_UNITS) : undefined;
  // 'minuts' is as near 'minute' as 'minutes': keep the plural the user was writing.
  if (near !== undefined && m?.[3]?.endsWith('s') && (DURATION_UNITS as readonly string[]).includes(`${near}s`)) near = `${near}s`;
  if (m && near !== undefined) return { problem: `'${m[3]}' is not a unit`, suggestion: `${m[1]}${m[2]}${near}` };
  return { problem: m ? `'${m[3]}' is not a unit` : 'it is not a number followed by a unit' };
}

/**
 * Parses a duration to whole milliseconds, at least 1 and at most 366 days.
 * @example parseDuration('15m') // 900000
 * @example parseDuration('1.5s') // 1500
 * @throws TollgateError TG_INVALID_DURATION, naming the accepted forms
 */
export function parseDuration(value: unknown, path = 'duration'): number {
  let problem: string | undefined;
  let suggestion: string | undefined;
  let result: number | undefined;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= 0) problem = 'a duration is more than 0 ms';
    else if (!Number.isInteger(value)) problem = 'durations are whole milliseconds';
    else result = value;
  } else if (typeof value === 'string') {
    const reading = readDuration(value);
    if ('ms' in reading) result = reading.ms;
    else ({ problem, suggestion } = reading);
    if (result === 0) problem = 'a duration is more than 0 ms';
  } else {
    problem = 'a duration is a number or a string';
  }
  if (result !== undefined && result > MAX_DURATION_MS) problem = 'it is longer than 366 days';
  if (problem !== undefined || result === undefined || result <= 0) {
    throw configError('TG_INVALID_DURATION', {
      path,
      expected: DURATION_FORMS,
      received: describe(value),
      fix: `${suggestion === undefined ? '' : `Did you mean '${suggestion}'? `}${capitalise(problem ?? 'it is not a duration')}.`,
    });
  }
  return result;
}

/** `<count>` then `/` or ` per `, then the period. */
const RATE_RE = /^(\d+(?:\.\d+)?)(\/| per )([a-zA-Z0-9.].*)$/;

/**
 * Parses a rate to its limit and window: `'100/min'`, `'10/sec'`, `'100/hour'`,
 * `'5/15m'`, `'100/1m'`, `'5 per minute'`, `'5 per 15 minutes'`.
 * @example parseRate('5/15m') // { limit: 5, windowMs: 900000 }
 * @example parseRate('10/sec') // { limit: 10, windowMs: 1000 }
 * @throws TollgateError TG_INVALID_RATE, naming the accepted forms
 */
export function parseRate(value: unknown, path = 'rate'): { limit: number; windowMs: number } {
  const fail = (why: string, suggestion?: string) =>
    configError('TG_INVALID_RATE', {
      path,
      expected: RATE_FORMS,
      received: describe(value),
      fix: `${suggestion === undefined ? '' : `Did you mean '${suggestion}'? `}${capitalise(why)}.`,
    });
  if (typeof value !== 'string') throw fail('a rate is a string');
  const m = RATE_RE.exec(value);
  if (m === null) throw fail("write a whole count, then '/' or ' per ', then a unit or a duration");
  const [, count = '', sep = '', period = ''] = m;
  // A period starting with a digit is a duration ('15m'); otherwise a unit, one of it.
  const reading = readDuration(/^[\d.]/.test(period) ? period : `1${period}`);
  if (!('ms' in reading)) {
    const near = reading.suggestion === undefined ? undefined : /^[\d.]/.test(period) ? reading.suggestion : reading.suggestion.slice(1);
    throw fail(
      `the period ${JSON.stringify(period)} cannot be read: ${reading.problem}`,
      near === undefined ? undefined : `${count}${sep}${near}`,
    );
  }
  const windowMs = reading.ms;
  if (windowMs <= 0 || windowMs > MAX_DURATION_MS) throw fail('the period is more than 0 ms and at most 366 days');
  const limit = Number(count);
  if (!Number.isSafeInteger(limit)) {
    throw fail('the count is a whole number of requests: scale both sides instead', wholeRate(count, sep, period));
  }
  if (limit <= 0) throw fail('the count is at least 1');
  return { limit, windowMs };
}

/** `1.5 per minute` → `3 per 2 minutes`: the same rate with a whole count, for the fix. */
function wholeRate(count: string, sep: string, period: string): string | undefined {
  const m = /^(\d+)\.(\d+)$/.exec(count);
  if (m === null || !/^[a-z]+$/.test(period)) return undefined;
  let num = BigInt(`${m[1]}${m[2]}`);
  let den = 10n ** BigInt((m[2] as string).length);
  for (let a = num, b = den; ; ) {
    if (b === 0n) {
      num /= a;
      den /= a;
      break;
    }
    [a, b] = [b, a % b];
  }
  if (den > 1000n) return undefined;
  return `${num}${sep}${den}${period.length > 3 ? ` ${period.replace(/s?$/, 's')}` : period}`;
}

function capitalise(s: string): string {
  return `${s.charAt(0).toUpperCase()}${s.slice(1)}`;
}
