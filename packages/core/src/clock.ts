/**
 * Clocks. Every place tollgate reads time asks a `Clock`, so tests drive a
 * `ManualClock` instead of sleeping.
 */
import { describe, TollgateError } from './errors.js';

/** A source of time in milliseconds. */
export interface Clock {
  now(): number;
}

/**
 * `t` when it is a time (a finite number of ms), else a `TG_INVALID_TIME` error: a clock
 * returning NaN, Infinity or a non-number would otherwise make every comparison false and
 * admit everything. Stores call it on every time they are given or read, so a bad clock
 * fails the store call (the failure policy or the error handler decides, never an
 * admission). Exported for stores.
 */
export function checkTime(t: unknown, where: string): number {
  // `t - t` is 0 for every finite number and NaN for NaN and ±Infinity.
  if (typeof t === 'number' && t - t === 0) return t;
  throw new TollgateError(
    'TG_INVALID_TIME',
    `${where}: expected the time as a finite number of ms, received ${describe(t)}. Fix the clock (Clock.now() must return a number such as Date.now()).`,
    {
      path: where,
      expected: 'a finite number of ms',
      received: describe(t),
      fix: 'Fix the clock: Clock.now() must return a number such as Date.now().',
    },
  );
}

/** Wall-clock time (`Date.now()`), the default. */
export const systemClock: Clock = { now: () => Date.now() };

/**
 * A clock that moves only when told to: for tests and for the simulator.
 * @example
 * const clock = new ManualClock(0);
 * clock.advance(1000);
 */
export class ManualClock implements Clock {
  #now: number;

  /** @param startMs the first reading, in ms. @default 0 */
  constructor(startMs = 0) {
    this.#now = startMs;
  }

  /** The current reading, in ms. */
  now(): number {
    return this.#now;
  }

  /** Moves time forward by `ms` (a negative value moves it back, which stores treat as no time passing). */
  advance(ms: number): void {
    this.#now += ms;
  }

  /** Sets the reading to `ms` (an earlier time is treated by stores as no time passing). */
  set(ms: number): void {
    this.#now = ms;
  }
}
