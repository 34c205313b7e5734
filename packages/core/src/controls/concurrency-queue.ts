/**
 * The concurrency limit's bounded FIFO queue: a refused request may wait (`queue`,
 * `queueTimeout`) for a slot to free up. Waiters are woken by local releases, and with a
 * `shared` store also by polling, since a slot freed by another instance sends no signal.
 */
import type { ConcurrencyFigures, ConcurrencyOutcome } from './concurrency.js';
import type { ConcurrencySettings } from './concurrency-options.js';
import type { Attempt, HeldSlots } from './concurrency-slots.js';
import type { TimerHandle } from './timers.js';

interface Waiter {
  id: string;
  key: string | undefined;
  /** The limit that refused it when it joined the queue (its place is counted there). */
  scope: 'key' | 'global';
  /** The limit that refused its latest attempt (decides 429 or 503 on timeout). */
  blockedOn: 'key' | 'global';
  since: number;
  timer: TimerHandle;
  done: (outcome: ConcurrencyOutcome) => void;
}

/** Admits a request whose slots were taken (`a`), after waiting `waitedMs`. */
export type Admit = (id: string, key: string | undefined, a: Attempt & { ok: true }, waitedMs: number) => ConcurrencyOutcome;

/** A refusal outcome: 429 when the per-key limit refused, 503 for the global one. */
export function refusalOutcome(
  scope: 'key' | 'global',
  reason: 'full' | 'queue-full' | 'queue-timeout',
  figures: ConcurrencyFigures[],
  retryAfterMs: number,
): ConcurrencyOutcome {
  return { admitted: false, reason, scope, status: scope === 'key' ? 429 : 503, retryAfterMs, figures };
}

// Waiting time is only reported, so any monotonic-enough reading will do.
const now = () => Date.now();

export class WaitQueue<R> {
  readonly #s: ConcurrencySettings<R>;
  readonly #slots: HeldSlots<R>;
  readonly #admit: Admit;
  readonly #waiters = new Set<Waiter>();
  readonly #waitingByKey = new Map<string, number>();
  #waitingGlobal = 0;
  #pollTimer: TimerHandle | undefined;
  #pumping = false;
  /** Keys released since the last pass (and whether everyone should be asked again). */
  readonly #dirty = new Set<string>();
  #dirtyGlobal = false;
  #dirtyAll = false;
  #closed = false;

  constructor(settings: ConcurrencySettings<R>, slots: HeldSlots<R>, admit: Admit) {
    this.#s = settings;
    this.#slots = slots;
    this.#admit = admit;
  }

  /** Requests waiting now. */
  get size(): number {
    return this.#waiters.size;
  }

  /**
   * What becomes of a request its first attempt refused: refused at once when there is no
   * queue or its place is full, else a wait that ends admitted, timed out or aborted.
   */
  enter(
    id: string,
    key: string | undefined,
    first: Attempt & { ok: false },
    signal?: AbortSignal,
  ): ConcurrencyOutcome | Promise<ConcurrencyOutcome> {
    const { queue, retryAfterMs, queueTimeoutMs, timers } = this.#s;
    const scope = first.scope;
    if (queue === 0 || this.#closed) return refusalOutcome(scope, 'full', first.figures, retryAfterMs);
    const waitingHere = scope === 'key' && key !== undefined ? (this.#waitingByKey.get(key) ?? 0) : this.#waitingGlobal;
    if (waitingHere >= queue) return refusalOutcome(scope, 'queue-full', first.figures, retryAfterMs);
    return new Promise<ConcurrencyOutcome>((resolve) => {
      const onAbort = () => {
        if (this.#leave(w)) resolve({ admitted: false, reason: 'aborted' });
      };
      const w: Waiter = {
        id,
        key,
        scope,
        blockedOn: scope,
        since: now(),
        timer: timers.setTimeout(() => {
          if (this.#leave(w)) {
            signal?.removeEventListener('abort', onAbort);
            resolve(refusalOutcome(w.blockedOn, 'queue-timeout', first.figures, retryAfterMs));
          }
        }, queueTimeoutMs),
        done: (outcome) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
      };
      this.#waiters.add(w);
      if (scope === 'key' && key !== undefined) this.#waitingByKey.set(key, waitingHere + 1);
      else this.#waitingGlobal++;
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#schedulePoll();
      // A release may have slipped in between our refusal and joining the queue.
      this.pump(key);
    });
  }

  /**
   * Offers free slots to waiters, oldest first; one pass per burst of releases. A release
   * under key K can only help waiters of K and waiters held up by the global limit, so
   * only those are asked again (`dirty`); a poll of a shared store asks everyone.
   */
  pump(released: string | undefined, everyone = false): void {
    this.#dirtyGlobal = true;
    if (everyone) this.#dirtyAll = true;
    else if (released !== undefined) this.#dirty.add(released);
    if (this.#pumping) return;
    this.#pumping = true;
    this.#pass()
      .catch(() => {
        // A failing store leaves waiters to their timeout.
      })
      .finally(() => {
        this.#pumping = false;
        this.#dirtyAll = false;
        this.#dirtyGlobal = false;
        this.#dirty.clear();
      });
  }

  /** Refuses every waiter (`aborted`) and stops polling; later refusals are not queued. */
  close(): void {
    this.#closed = true;
    for (const w of [...this.#waiters]) if (this.#leave(w)) w.done({ admitted: false, reason: 'aborted' });
    if (this.#pollTimer !== undefined) this.#s.timers.clearTimeout(this.#pollTimer);
    this.#pollTimer = undefined;
  }

  async #pass(): Promise<void> {
    const waiters = this.#waiters;
    while ((this.#dirtyAll || this.#dirtyGlobal || this.#dirty.size > 0) && waiters.size > 0 && !this.#closed) {
      const all = this.#dirtyAll;
      const keys = new Set(this.#dirty);
      this.#dirtyAll = false;
      this.#dirtyGlobal = false;
      this.#dirty.clear();
      for (const w of [...waiters]) {
        if (!waiters.has(w)) continue;
        if (!all && w.blockedOn === 'key' && (w.key === undefined || !keys.has(w.key))) continue;
        const a = await this.#slots.attempt(w.key, w.id);
        if (!waiters.has(w)) {
          // Timed out or aborted while we asked: give the slot straight back.
          if (a.ok) await this.#slots.giveBack(a.taken, w.id);
          continue;
        }
        if (a.ok) {
          this.#leave(w);
          w.done(this.#admit(w.id, w.key, a, now() - w.since));
        } else w.blockedOn = a.scope;
      }
    }
  }

  #leave(w: Waiter): boolean {
    if (!this.#waiters.delete(w)) return false;
    const { timers } = this.#s;
    timers.clearTimeout(w.timer);
    if (w.scope === 'key' && w.key !== undefined) {
      const n = (this.#waitingByKey.get(w.key) ?? 1) - 1;
      if (n > 0) this.#waitingByKey.set(w.key, n);
      else this.#waitingByKey.delete(w.key);
    } else this.#waitingGlobal--;
    if (this.#waiters.size === 0 && this.#pollTimer !== undefined) {
      timers.clearTimeout(this.#pollTimer);
      this.#pollTimer = undefined;
    }
    return true;
  }

  #schedulePoll(): void {
    if (!this.#s.store.shared || this.#pollTimer !== undefined || this.#waiters.size === 0 || this.#closed) return;
    this.#pollTimer = this.#s.timers.setTimeout(() => {
      this.#pollTimer = undefined;
      this.pump(undefined, true);
      this.#schedulePoll();
    }, this.#s.pollMs);
  }
}
