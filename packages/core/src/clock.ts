/**
 * Clocks. Every place tollgate reads time asks a `Clock`, so tests drive a
 * `ManualClock` instead of sleeping.
 */

/** A source of time in milliseconds. */
export interface Clock {
  now(): number;
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
