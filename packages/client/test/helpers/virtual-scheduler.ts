/**
 * A virtual scheduler for client tests: a ManualClock plus a `sleep` that never waits on
 * the real clock. Time jumps from one pending timer to the next, but only once the
 * process is quiet — no tracked fetch in flight and no new timer or fetch for several
 * event-loop turns — so a response being read on a real loopback socket is always
 * handled at the virtual instant it belongs to.
 */
import { setImmediate as turn } from 'node:timers/promises';
import type { Sleep } from '@tollgate/client';
import { ManualClock } from '@tollgate/core';

interface Timer {
  at: number;
  seq: number;
  fire: () => void;
}

export class VirtualScheduler {
  readonly clock: ManualClock;
  readonly #timers: Timer[] = [];
  #seq = 0;
  #inflight = 0;
  #activity = 0;
  /** Requests the test knows are parked on purpose (a server that never answers). */
  parked: () => number = () => 0;

  constructor(startMs = 0) {
    this.clock = new ManualClock(startMs);
  }

  readonly sleep: Sleep = (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer: Timer = {
        at: this.clock.now() + Math.max(0, ms),
        seq: this.#seq++,
        fire: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.#timers.indexOf(timer);
        if (i >= 0) this.#timers.splice(i, 1);
        this.#activity++;
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#timers.push(timer);
      this.#activity++;
    });

  /** Wraps a fetch so the scheduler knows when a request is on the wire. */
  track(inner: typeof fetch = globalThis.fetch): typeof fetch {
    return (async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      this.#inflight++;
      this.#activity++;
      try {
        return await inner(input, init);
      } finally {
        this.#inflight--;
        this.#activity++;
      }
    }) as typeof fetch;
  }

  get pending(): number {
    return this.#timers.length;
  }

  /** Waits (in real time, briefly) until nothing is in flight and nothing changes for a few turns. */
  async settle(): Promise<void> {
    const started = Date.now();
    let quiet = 0;
    let seen = this.#activity;
    while (quiet < 5) {
      if (Date.now() - started > 15_000) throw new Error(`scheduler: still busy after 15 s (${this.#inflight} in flight)`);
      if (this.#inflight - this.parked() > 0) {
        quiet = 0;
        await new Promise((r) => setTimeout(r, 1));
        continue;
      }
      await turn();
      if (this.#activity !== seen) {
        seen = this.#activity;
        quiet = 0;
      } else quiet++;
    }
  }

  /** Settles, then fires the earliest timer (moving the clock to it). False when none is left. */
  async step(): Promise<boolean> {
    await this.settle();
    if (this.#timers.length === 0) return false;
    let k = 0;
    for (let i = 1; i < this.#timers.length; i++) {
      const a = this.#timers[i] as Timer;
      const b = this.#timers[k] as Timer;
      if (a.at < b.at || (a.at === b.at && a.seq < b.seq)) k = i;
    }
    const [t] = this.#timers.splice(k, 1) as [Timer];
    if (t.at > this.clock.now()) this.clock.set(t.at);
    this.#activity++;
    t.fire();
    return true;
  }

  /** Runs timers until none is left (or `maxSteps`). */
  async run(maxSteps = 1_000_000): Promise<void> {
    for (let i = 0; i < maxSteps; i++) if (!(await this.step())) return;
    throw new Error(`scheduler: still running after ${maxSteps} steps`);
  }

  /** Fires every timer due within `ms` from now, then leaves the clock at now + ms. */
  async advance(ms: number): Promise<void> {
    const end = this.clock.now() + ms;
    for (;;) {
      await this.settle();
      const due = this.#timers.filter((t) => t.at <= end);
      if (due.length === 0) break;
      await this.step();
    }
    if (end > this.clock.now()) this.clock.set(end);
    await this.settle();
  }
}
