/**
 * Batching for a standalone `RedisStore`: the stacks asked in the same tick are sent as one
 * script run (decided one after the other, each all-or-nothing), under one deadline shared
 * by the tick and watched by one timer for every run in flight.
 */
import type { StoreDecision } from '@tollgate/core';
import { decideArgs, parseDecisions, type StackCall, settleArgs } from './args.js';
import { timeoutError } from './errors.js';
import { type ScriptRunner, STORE_CODE } from './script.js';

/** Most ops decided by one batched script run. */
const BATCH_MAX_OPS = 256;

/** A stack waiting for its batch's script run (it is the batch's `StackCall` itself). */
export interface PendingStack extends StackCall {
  readonly keys: readonly string[];
  /** Settles the decision: Redis' answer, or the failure policy's. */
  readonly resolve: (d: StoreDecision | Promise<StoreDecision>) => void;
  /** Whether it was answered (by Redis, or by the policy after a failure or the deadline). */
  done: boolean;
  /** A settle that gives a lease's unused units back: its failure is reported as a refund's. */
  readonly leased?: boolean;
}

/** One batched script run: its stacks, and its deadline (performance.now() time). */
interface BatchRun {
  readonly stacks: readonly PendingStack[];
  readonly deadline: number;
  /** Neither answered nor past its deadline yet. */
  open: boolean;
}

/** What the store does with a batched stack's answer or failure. */
export interface BatchHost {
  /** Bookkeeping of a decision (or settle) Redis made. */
  answered(p: PendingStack, d: StoreDecision): void;
  /** The stack's run failed or its deadline passed: the failure policy answers it (and marks it done). */
  fail(p: PendingStack, err: unknown): void;
}

/** The batches of one store. */
export class Batcher {
  readonly #runner: ScriptRunner;
  readonly #minTtl: string;
  readonly #timeoutMs: number;
  readonly #host: BatchHost;

  /**
   * The stacks of this tick, `#pending[0..#pendingCount)`: one array for the store's life
   * (a new one per tick grew a backing store of 17 entries for the lone stack), each entry
   * cleared when its tick is sent.
   */
  readonly #pending: (PendingStack | undefined)[] = [];
  #pendingCount = 0;
  /** When the first stack of `#pending` was asked (performance.now()). */
  #pendingAt = 0;
  /** Batched runs whose deadline is watched, oldest first (see `#watch`). */
  readonly #runs: BatchRun[] = [];
  /** Runs of `#runs` not yet answered. */
  #inFlight = 0;
  /** The one deadline timer of the batched runs, armed for the oldest run's deadline. */
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(runner: ScriptRunner, minTtl: string, timeoutMs: number, host: BatchHost) {
    this.#runner = runner;
    this.#minTtl = minTtl;
    this.#timeoutMs = timeoutMs;
    this.#host = host;
  }

  /**
   * Queues a stack for the batch of this tick. Stacks requested in the same tick are sent
   * together, as one script run that decides them one after the other (each still
   * all-or-nothing): the per-call cost of a script run is paid once per batch, which is
   * what many requests in flight need. The tick's stacks share one deadline, `timeoutMs`
   * after the first of them was asked (see `#watch`).
   */
  enqueue(p: PendingStack): void {
    this.#pending[this.#pendingCount++] = p;
    if (this.#pendingCount === 1) {
      this.#pendingAt = performance.now();
      process.nextTick(this.#flush);
    }
  }

  /**
   * Watches a script run's deadline. One timer serves every run in flight, oldest first
   * (runs are sent in the order they were asked, and all have the same `timeoutMs`): it
   * is armed for the oldest deadline and, when it fires, fails what is past its deadline
   * and is armed again for the next. A run answered in time costs no timer of its own, so
   * a request alone in its tick (the common case over HTTP) arms and clears nothing; while
   * no run is in flight the timer holds no reference that keeps the process alive.
   */
  #watch(run: BatchRun): void {
    this.#runs.push(run);
    if (this.#inFlight++ === 0) this.#timer?.ref();
    if (this.#timer === undefined) this.#timer = setTimeout(this.#expire, Math.max(1, run.deadline - performance.now()));
  }

  /** A run was answered (or failed) before its deadline. */
  #settle(run: BatchRun): void {
    run.open = false;
    // Runs are answered in the order they were sent: the answered ones at the head leave the
    // queue now, so it holds about what is in flight (not every run since the timer fired).
    const runs = this.#runs;
    while (runs.length > 0 && !(runs[0] as BatchRun).open) runs.shift();
    if (--this.#inFlight === 0) this.#timer?.unref();
  }

  /** The deadline timer: every stack of a run past its deadline fails with a timeout. */
  readonly #expire = (): void => {
    this.#timer = undefined;
    const runs = this.#runs;
    const now = performance.now();
    let err: unknown;
    while (runs.length > 0) {
      const run = runs[0] as BatchRun;
      // Timers fire on whole milliseconds: a deadline less than 1 ms away is due.
      if (run.deadline - now >= 1) break;
      // Settling takes it (and the answered runs behind it) off the queue.
      this.#settle(run);
      err ??= timeoutError(this.#timeoutMs);
      for (const p of run.stacks) if (!p.done) this.#host.fail(p, err);
    }
    if (runs.length > 0) {
      this.#timer = setTimeout(this.#expire, Math.max(1, (runs[0] as BatchRun).deadline - now));
      if (this.#inFlight === 0) this.#timer.unref();
    }
  };

  readonly #flush = (): void => {
    const pending = this.#pending;
    const n = this.#pendingCount;
    this.#pendingCount = 0;
    const deadline = this.#pendingAt + this.#timeoutMs;
    if (n === 1) {
      // Alone in its tick: its own keys and size, nothing gathered.
      const p = pending[0] as PendingStack;
      pending[0] = undefined;
      this.#send([p], p.keys, [p.cmd === 's' ? -1 : p.ops.length], deadline);
      return;
    }
    const all = pending.slice(0, n) as PendingStack[];
    // A burst's array is not kept at its size; a usual one is kept, emptied.
    if (n > BATCH_MAX_OPS) pending.length = 0;
    else pending.fill(undefined, 0, n);
    for (let from = 0; from < all.length; ) {
      // Bounded batches keep one script run short (Redis runs scripts one at a time).
      let to = from;
      let ops = 0;
      const sizes: number[] = [];
      const keys: string[] = [];
      while (to < all.length && (to === from || ops + (all[to] as PendingStack).ops.length <= BATCH_MAX_OPS)) {
        const p = all[to] as PendingStack;
        ops += p.ops.length;
        sizes.push(p.cmd === 's' ? 0 : p.ops.length);
        for (const k of p.keys) keys.push(k);
        to++;
      }
      this.#send(from === 0 && to === all.length ? all : all.slice(from, to), keys, sizes, deadline);
      from = to;
    }
  };

  /**
   * Sends one batched script run and settles its stacks from the reply. `sizes[j]`: stack
   * j's op count in the reply (a settle has none); `[-1]`, a settle alone, sent as one.
   */
  #send(batch: readonly PendingStack[], keys: readonly string[], sizes: readonly number[], deadline: number): void {
    let reply: Promise<unknown>;
    try {
      const lone = sizes[0] === -1 ? (batch[0] as PendingStack) : undefined;
      const call =
        lone === undefined ? decideArgs(batch, keys, this.#minTtl) : settleArgs(lone.ops, keys, lone.now, lone.at as number, this.#minTtl);
      reply = this.#runner.call(STORE_CODE, call.keys, call.args);
    } catch (err) {
      // Thrown before Redis was asked (a client that throws instead of rejecting): this
      // run's stacks fail now; the tick's other runs go on.
      for (const p of batch) if (!p.done) this.#host.fail(p, err);
      return;
    }
    const run: BatchRun = { stacks: batch, deadline, open: true };
    this.#watch(run);
    reply.then(
      (r) => this.#answer(run, r, sizes),
      (err: unknown) => {
        if (run.open) this.#settle(run);
        for (const p of batch) if (!p.done) this.#host.fail(p, err);
      },
    );
  }

  /** A batched run's reply: each stack not yet answered (by its deadline) gets its decision. */
  #answer(run: BatchRun, reply: unknown, sizes: readonly number[]): void {
    if (run.open) this.#settle(run);
    const batch = run.stacks;
    let ds: StoreDecision[];
    try {
      ds = sizes[0] === -1 ? [{ allowed: true, now: 0, outcomes: [] }] : parseDecisions(reply, sizes);
    } catch (err) {
      for (const p of batch) if (!p.done) this.#host.fail(p, err);
      return;
    }
    for (let j = 0; j < batch.length; j++) {
      const p = batch[j] as PendingStack;
      if (p.done) continue; // past the deadline: the policy answered
      p.done = true;
      const d = ds[j] as StoreDecision;
      this.#host.answered(p, d);
      p.resolve(d);
    }
  }

  /** The store closed: with nothing in flight the timer goes (runs in flight keep theirs until answered or expired). */
  close(): void {
    if (this.#inFlight === 0) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#runs.length = 0;
    }
  }
}
