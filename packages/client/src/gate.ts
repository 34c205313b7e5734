/**
 * What happens before an attempt is sent: an origin's RateLimit hold, then the
 * optional self-pacing rule.
 *
 * - A hold is learned from a response: a RateLimit policy at r=0 holds the scope for `t`,
 *   and a 429/503 with Retry-After holds it for that long. The next request to the scope
 *   waits for the hold instead of being sent.
 * - Pacing uses a core limiter (`createLimiter`) with a delay-until-admitted loop: a
 *   refusal's `retryAfterMs` is how long to wait before asking again, and
 *   an admission's `delayMs` (leaky queue) is how long to wait before sending.
 * - Requests of one scope pass the pacer one at a time, in arrival order (a FIFO lane), so
 *   a thousand queued requests do not all poll the limiter at every instant.
 * - After a hold, one request goes first (a probe) and the rest wait for its response, so
 *   a backlog does not rush the server the instant the hold ends.
 */
import { createLimiter, type Limiter, MemoryStore } from '@tollgate/core';
import { TollgateClientError } from './errors.js';
import type { NormalizedOptions, PaceRequest } from './options.js';
import type { PreparedCall } from './request.js';
import { linkedController } from './sleep.js';

/** Thrown inside the client when a wait would pass the call's deadline. */
export class DeadlineReached extends Error {}

const noop = (): void => {};

/** Scopes remembered before expired holds are swept. */
const HOLDS_SWEEP_AT = 1024;

/** A FIFO mutex: one holder at a time; an aborted waiter leaves the line. */
class Lane {
  #busy = false;
  readonly #waiting: { go: () => void }[] = [];

  acquire(signal: AbortSignal | undefined): Promise<() => void> {
    const release = () => {
      const next = this.#waiting.shift();
      if (next) next.go();
      else this.#busy = false;
    };
    if (!this.#busy) {
      this.#busy = true;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const waiter = {
        go: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      const onAbort = () => {
        const i = this.#waiting.indexOf(waiter);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  get idle(): boolean {
    return !this.#busy;
  }
}

export class Gate {
  readonly #o: NormalizedOptions;
  readonly #holds = new Map<string, number>();
  readonly #lanes = new Map<string, Lane>();
  readonly #pacer: Limiter<PaceRequest> | undefined;

  constructor(o: NormalizedOptions) {
    this.#o = o;
    if (o.pace) {
      this.#pacer = createLimiter<PaceRequest>({
        rules: o.pace,
        clock: o.clock,
        // Few keys (one per scope); no sweep timer, expiry is lazy.
        store: new MemoryStore({ clock: o.clock, sweepIntervalMs: 0, maxKeys: 100_000 }),
        defaultKey: (r) => r.scope,
      });
    }
  }

  /** Remembers that `scope` must not be sent to for `waitMs` from now (longer holds win). */
  hold(scope: string, waitMs: number): void {
    const now = this.#o.clock.now();
    const until = now + waitMs;
    if ((this.#holds.get(scope) ?? 0) >= until) return;
    if (this.#holds.size >= HOLDS_SWEEP_AT) {
      for (const [k, t] of this.#holds) if (t <= now) this.#holds.delete(k);
    }
    this.#holds.set(scope, until);
  }

  /** ms until `scope` may be sent to again (0 when it may now). */
  heldFor(scope: string): number {
    const until = this.#holds.get(scope);
    if (until === undefined) return 0;
    const left = until - this.#o.clock.now();
    if (left <= 0) this.#holds.delete(scope);
    return Math.max(0, left);
  }

  /**
   * Waits until the call may be sent, and returns what to call once its response (or
   * error) has been learned from.
   *
   * Calls of one scope queue in a FIFO lane when the scope is paced or held. A call that
   * had to wait for a hold is a probe: it keeps the lane until its response is in, so the
   * calls queued behind it learn whether the limit has recovered (or a new hold) before
   * they are sent, instead of all leaving together when the hold ends.
   * @throws DeadlineReached when a wait would end after `deadlineAt`
   * @throws the signal's reason when the caller aborts
   */
  async admit(call: PreparedCall, scope: string, deadlineAt: number): Promise<() => void> {
    let lane = this.#lanes.get(scope);
    if (!this.#pacer && (lane === undefined || lane.idle) && this.heldFor(scope) === 0) return noop;
    if (!lane) {
      lane = new Lane();
      this.#lanes.set(scope, lane);
    }
    const release = await this.#queue(lane, call, deadlineAt);
    const done = () => {
      release();
      if (lane.idle && this.#lanes.get(scope) === lane) this.#lanes.delete(scope);
    };
    try {
      let probe = await this.#waitHold(call, scope, deadlineAt);
      if (this.#pacer && (await this.#pace(this.#pacer, call, scope, deadlineAt))) probe = true;
      if (probe) return done;
    } catch (e) {
      done();
      throw e;
    }
    done();
    return noop;
  }

  /** Waits for the lane; a deadline passing while queued ends the wait (DeadlineReached). */
  async #queue(lane: Lane, call: PreparedCall, deadlineAt: number): Promise<() => void> {
    if (lane.idle || deadlineAt === Number.POSITIVE_INFINITY) return lane.acquire(call.signal);
    const timer = new AbortController();
    const { controller, dispose } = linkedController([call.signal, timer.signal]);
    this.#o.sleep(Math.max(0, deadlineAt - this.#o.clock.now()), timer.signal).then(
      () => timer.abort(new DeadlineReached()),
      () => {},
    );
    try {
      return await lane.acquire(controller.signal);
    } finally {
      dispose();
      if (!timer.signal.aborted) timer.abort();
    }
  }

  /** Waits while the scope is held; true when it had to wait. */
  async #waitHold(call: PreparedCall, scope: string, deadlineAt: number): Promise<boolean> {
    let waited = false;
    for (let wait = this.heldFor(scope); wait > 0; wait = this.heldFor(scope)) {
      await this.#wait('ratelimit', wait, call, scope, deadlineAt);
      waited = true;
    }
    return waited;
  }

  /** The delay-until-admitted loop; true when it also had to wait for a hold. */
  async #pace(pacer: Limiter<PaceRequest>, call: PreparedCall, scope: string, deadlineAt: number): Promise<boolean> {
    const req: PaceRequest = { url: call.url, method: call.method, scope };
    let held = false;
    for (;;) {
      if (await this.#waitHold(call, scope, deadlineAt)) held = true;
      const d = await pacer.consume(req);
      if (d.allowed) {
        // A hold learned while we asked: give the slot back and wait for the hold first.
        if (this.heldFor(scope) > 0) {
          await pacer.refund(req, d);
          continue;
        }
        if (d.delayMs > 0) {
          if (this.#o.clock.now() + d.delayMs > deadlineAt) {
            await pacer.refund(req, d);
            throw new DeadlineReached();
          }
          await this.#wait('pace', d.delayMs, call, scope, deadlineAt);
        }
        return held;
      }
      if (!(d.retryAfterMs > 0)) {
        throw new TollgateClientError(
          'TGC_PACE_UNSATISFIABLE',
          `createFetch.pace: expected a request the pacing rule can admit, received one refused by ${d.rejectedBy.join(', ')} ` +
            "for good (its cost exceeds what the rule can ever admit). Lower the cost or raise the rule's limit.",
        );
      }
      await this.#wait('pace', d.retryAfterMs, call, scope, deadlineAt);
    }
  }

  async #wait(reason: 'ratelimit' | 'pace', waitMs: number, call: PreparedCall, scope: string, deadlineAt: number): Promise<void> {
    if (this.#o.clock.now() + waitMs > deadlineAt) throw new DeadlineReached();
    this.#o.onWait?.({ reason, waitMs, scope, url: call.url.href, method: call.method });
    await this.#o.sleep(waitMs, call.signal);
  }
}
