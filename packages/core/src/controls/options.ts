/**
 * Option validation shared by the controls: every problem is found at
 * construction and reported with the core error catalogue.
 */
import { type Duration, parseDuration } from '../duration.js';
import { configError, describe } from '../errors.js';
import { unknownOptionFix } from '../suggest.js';

/** Throws TG_INVALID_OPTION unless `options` is a plain object; TG_UNKNOWN_OPTION for a key outside `known`. */
export function checkOptions(options: unknown, known: readonly string[], path: string): asserts options is Record<string, unknown> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'an options object',
      received: describe(options),
      fix: `Pass { ${known.slice(0, 3).join(', ')}, ... }.`,
    });
  }
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `${path}.${k}`,
        expected: `one of ${known.join(', ')}`,
        received: JSON.stringify(k),
        fix: unknownOptionFix(k, known),
      });
    }
  }
}

/** A whole number `>= min` (`min` 0 or 1). */
export function wholeNumber(value: unknown, path: string, min: 0 | 1): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw configError('TG_INVALID_LIMIT', {
      path,
      expected: min === 0 ? 'a whole number of 0 or more' : 'a whole number of at least 1',
      received: describe(value),
      fix: min === 0 ? 'Use 0 or a positive whole number.' : 'Use a positive whole number.',
    });
  }
  return value;
}

/** A duration no longer than `maxMs`. */
export function boundedDuration(value: unknown, path: string, maxMs: number): number {
  const ms = parseDuration(value as Duration, path);
  if (ms > maxMs) {
    throw configError('TG_INVALID_DURATION', {
      path,
      expected: `a duration of at most ${maxMs} ms`,
      received: describe(value),
      fix: 'Use a shorter duration (timers cannot wait longer than 2^31-1 ms).',
    });
  }
  return ms;
}

/** A function, or `undefined`. */
export function optionalFn<F>(value: unknown, path: string, shape: string): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') {
    throw configError('TG_INVALID_OPTION', { path, expected: `a function ${shape}`, received: describe(value), fix: 'Pass a function.' });
  }
  return value as F;
}

/** The longest a Node timer can wait (larger values fire at once with a warning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;
