/**
 * Timer sources for the controls (throttle delays, leaky-queue waits,
 * concurrency queue timeouts and lease renewal).
 *
 * Every control that waits asks a `Timers` object instead of calling `setTimeout`
 * directly, so tests drive time with `ManualTimers` on a `ManualClock` and never sleep.
 */
import type { ManualClock } from '../clock.js';

/** An opaque handle returned by `Timers.setTimeout`. */
export type TimerHandle = unknown;

/** Where the controls get their timers. */
export interface Timers {
  /** Runs `fn` once, `ms` milliseconds from now. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Cancels a timer; cancelling one that already ran is a no-op. */
  clearTimeout(handle: TimerHandle): void;
  /**
   * Marks a timer as not keeping the process alive (background work such as lease
   * renewal). Optional: sources without a process notion ignore it.
   */
  unref?(handle: TimerHandle): void;
}

/** The real timers of the process. */
export const systemTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  unref: (handle) => {
    (handle as ReturnType<typeof setTimeout>).unref();
  },
};

interface Pending {
  id: number;
  due: number;
  fn: () => void;
}

/** Lets pending promise callbacks and already-queued I/O callbacks run. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Virtual timers on a `ManualClock`: nothing runs until `advance` moves time, and then
 * every timer due runs in due order with the clock set to its due time.
 * @example
 * const clock = new ManualClock(0);
 * const timers = new ManualTimers(clock);
 * timers.setTimeout(() => console.log(clock.now()), 500);
 * await timers.advance(1000); // logs 500; clock ends at 1000
 */
export class ManualTimers implements Timers {
  readonly clock: ManualClock;
  readonly #pending = new Map<number, Pending>();
  #seq = 0;

  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = ++this.#seq;
    const wait = Number.isFinite(ms) && ms > 0 ? ms : 0;
    this.#pending.set(id, { id, due: this.clock.now() + wait, fn });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#pending.delete(handle as number);
  }

  /** Timers scheduled and not yet run or cleared. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Due times of the pending timers, earliest first (for assertions). */
  dueTimes(): number[] {
    return [...this.#pending.values()].map((p) => p.due).sort((a, b) => a - b);
  }

  /**
   * Moves the clock forward by `ms`, running every timer that falls due on the way (in
   * due order, ties in scheduling order). Between timers it yields to the event loop
   * `turns` times so that promise chains and loopback I/O started by one timer can
   * schedule the next.
   */
  async advance(ms: number, turns = 3): Promise<void> {
    const target = this.clock.now() + ms;
    for (;;) {
      for (let i = 0; i < turns; i++) await turn();
      let next: Pending | undefined;
      for (const p of this.#pending.values()) {
        if (p.due <= target && (next === undefined || p.due < next.due || (p.due === next.due && p.id < next.id))) next = p;
      }
      if (next === undefined) break;
      this.#pending.delete(next.id);
      if (next.due > this.clock.now()) this.clock.set(next.due);
      next.fn();
    }
    if (target > this.clock.now()) this.clock.set(target);
    for (let i = 0; i < turns; i++) await turn();
  }
}
