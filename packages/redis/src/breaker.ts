/**
 * The circuit breaker of the failure policy.
 *
 * closed → open after `failures` consecutive failed calls; open → half-open once
 * `cooldownMs` have passed, when the next call is let through as the single probe;
 * half-open → closed when the probe succeeds, back to open when it fails. While open (and
 * while a probe is in flight) calls are answered by the failure policy without touching
 * Redis, so a dead Redis costs nothing per request.
 */

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerOptions {
  /**
   * Consecutive failures that open the breaker.
   * @default 3
   */
  failures?: number;
  /**
   * How long the breaker stays open before a probe, in ms.
   * @default 1000
   */
  cooldownMs?: number;
}

export class Breaker {
  readonly threshold: number;
  readonly cooldownMs: number;
  #state: BreakerState = 'closed';
  #failures = 0;
  #openedAt = 0;
  readonly #now: () => number;
  readonly #onChange: (from: BreakerState, to: BreakerState, failures: number) => void;

  constructor(o: Required<BreakerOptions>, now: () => number, onChange: (from: BreakerState, to: BreakerState, failures: number) => void) {
    this.threshold = o.failures;
    this.cooldownMs = o.cooldownMs;
    this.#now = now;
    this.#onChange = onChange;
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** Whether a call may go to Redis now. Moves open → half-open (this call is the probe). */
  tryCall(): boolean {
    if (this.#state === 'closed') return true;
    if (this.#state === 'open' && this.#now() - this.#openedAt >= this.cooldownMs) {
      this.#set('half-open');
      return true;
    }
    return false;
  }

  /** ms until the breaker will let a probe through (0 when closed). */
  retryInMs(): number {
    if (this.#state === 'closed') return 0;
    return Math.max(0, this.#openedAt + this.cooldownMs - this.#now());
  }

  success(): void {
    this.#failures = 0;
    if (this.#state !== 'closed') this.#set('closed');
  }

  failure(): void {
    this.#failures++;
    if (this.#state === 'half-open' || (this.#state === 'closed' && this.#failures >= this.threshold)) {
      this.#openedAt = this.#now();
      this.#set('open');
    }
  }

  #set(to: BreakerState): void {
    const from = this.#state;
    this.#state = to;
    this.#onChange(from, to, this.#failures);
  }
}
