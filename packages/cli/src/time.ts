/**
 * Points in simulated time and how they are written (SPEC 11).
 *
 * Arrival patterns and traces name instants, not only durations, so unlike core's
 * `parseDuration` these accept 0 and decimals: `0`, `250` (ms), `250ms`, `1.5s`, `2m`.
 * Simulated time is whole milliseconds, like every store's clock.
 */
import { cliError, show } from './errors.js';

const UNIT: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000 };
const TIME_RE = /^(\d+(?:\.\d+)?)(ms|s|sec|m|min|h)?$/;

/** Longest simulated span accepted anywhere: one day. */
export const MAX_TIME_MS = 86_400_000;

/**
 * Parses a time or duration of simulated time to whole milliseconds (at least `min`).
 * @example parseTime('1.5s') // 1500
 */
export function parseTime(text: string, path: string, min = 0): number {
  const m = TIME_RE.exec(text.trim());
  const ms = m ? Number(m[1]) * (UNIT[m[2] ?? 'ms'] as number) : Number.NaN;
  if (!Number.isInteger(ms) || ms < min || ms > MAX_TIME_MS) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path,
      expected: `a time of at least ${min} ms and at most a day, in whole ms: a number of ms or one with a unit such as "250ms", "1.5s", "2m"`,
      received: show(text),
      fix: 'Write the time as milliseconds or with one of the units ms, s, m, h.',
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
