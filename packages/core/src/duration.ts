/**
 * Durations and rate shorthands (SPEC 2).
 *
 * A duration is a number of milliseconds or a string `250ms`, `1s`, `10s`, `1m` / `1min`,
 * `15m`, `1h`, `1d`. A rate is `"<limit>/<duration>"` or `"<limit>/<unit>"`.
 */
import { configError, describe } from './errors.js';

/** A duration: milliseconds, or a string such as `'250ms'`, `'1s'`, `'15m'`, `'1h'`, `'1d'`. */
export type Duration = number | string;

/** The units of SPEC 2 and only those ("anything else is a construction error"). */
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  min: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const DURATION_RE = /^(\d+)(ms|s|m|min|h|d)$/;

/** Largest duration accepted (366 days): no rate limit needs a longer window or block. */
const MAX_DURATION_MS = 366 * 86_400_000;

/**
 * Parses a duration to whole milliseconds.
 * @example parseDuration('15m') // 900000
 * @throws TollgateError TG_INVALID_DURATION
 */
export function parseDuration(value: unknown, path = 'duration'): number {
  let ms: number | undefined;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'string') {
    const m = DURATION_RE.exec(value);
    if (m) ms = Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  }
  if (ms === undefined || !Number.isInteger(ms) || ms <= 0 || ms > MAX_DURATION_MS) {
    throw configError('TG_INVALID_DURATION', {
      path,
      expected: 'a positive whole number of milliseconds (at most one year) or a string like "250ms", "1s", "15m", "1h", "1d"',
      received: describe(value),
      fix: 'Write the duration as a number of milliseconds or with one of the units ms, s, m (min), h, d.',
    });
  }
  return ms;
}

const RATE_RE = /^(\d+)\/(\d*)([a-z]+)$/;

/**
 * Parses `"100/min"`, `"100/1m"`, `"5/15m"`, `"10/s"`, `"1000/h"`, `"500000/d"`.
 * @example parseRate('5/15m') // { limit: 5, windowMs: 900000 }
 * @throws TollgateError TG_INVALID_RATE
 */
export function parseRate(value: unknown, path = 'rate'): { limit: number; windowMs: number } {
  const fail = () =>
    configError('TG_INVALID_RATE', {
      path,
      expected: 'a string "<limit>/<duration>" with a positive whole limit, such as "100/min", "5/15m" or "10/s"',
      received: describe(value),
      fix: 'Write the rate as a count, a slash and a duration or unit.',
    });
  if (typeof value !== 'string') throw fail();
  const m = RATE_RE.exec(value);
  if (!m) throw fail();
  const limit = Number(m[1]);
  const count = m[2] === '' ? 1 : Number(m[2]);
  // An own property only: `UNIT_MS.constructor` is Object, which made '5/constructor' a NaN window.
  const unit = Object.hasOwn(UNIT_MS, m[3] as string) ? UNIT_MS[m[3] as string] : undefined;
  if (!unit || !Number.isSafeInteger(limit) || limit <= 0 || count <= 0) throw fail();
  const windowMs = count * unit;
  if (windowMs > MAX_DURATION_MS) throw fail();
  return { limit, windowMs };
}
