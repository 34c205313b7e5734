/**
 * Points in simulated time and how they are written.
 *
 * Arrival patterns and traces name instants, not only durations, so unlike core's
 * `parseDuration` these accept 0 and bare numbers (milliseconds): `0`, `250`, `250ms`,
 * `1.5s`, `2m`, `1 minute`. Everything with a unit is read by core's `readDuration`, so
 * the CLI and the rules it simulates agree on every unit and refuse the same ambiguous
 * forms. Simulated time is whole milliseconds, like every store's clock.
 */
import { readDuration } from '@tollgate/core';
import { cliError, show } from './errors.js';

/** Longest simulated span accepted anywhere: one day. */
export const MAX_TIME_MS = 86_400_000;

/**
 * Parses a time or duration of simulated time to whole milliseconds (at least `min`).
 * @example parseTime('1.5s') // 1500
 * @example parseTime('250') // 250
 */
export function parseTime(text: string, path: string, min = 0): number {
  const t = text.trim();
  // A bare number is milliseconds here (a point on the timeline), as `--at 250`.
  const reading = readDuration(/^\d+(?:\.\d+)?$/.test(t) ? `${t}ms` : t);
  const ms = 'ms' in reading ? reading.ms : Number.NaN;
  if (!Number.isInteger(ms) || ms < min || ms > MAX_TIME_MS) {
    const why =
      'ms' in reading ? '' : ` (${reading.problem}${reading.suggestion === undefined ? '' : `; did you mean '${reading.suggestion}'?`})`;
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path,
      expected: `a time of at least ${min} ms and at most a day, in whole ms: a number of ms or one with a unit such as "250ms", "1.5s", "2m", "1 minute"`,
      received: `${show(text)}${why}`,
      fix: 'Write the time as milliseconds or with a unit: ms, s (sec, second), m (min, minute), h (hr, hour).',
    });
  }
  return ms;
}

/** Formats ms of simulated time as seconds with millisecond precision: `1.250`. */
export function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

/** Formats a length of time for people: `250 ms`, `1 s`, `1.5 s`, `2 min`. */
export function humanDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000 || ms % 60_000 !== 0) return `${Number((ms / 1000).toFixed(3))} s`;
  if (ms < 3_600_000 || ms % 3_600_000 !== 0) return `${ms / 60_000} min`;
  return `${ms / 3_600_000} h`;
}
