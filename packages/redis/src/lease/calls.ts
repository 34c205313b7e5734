/**
 * Lease calls (lua/lease.lua) by tick: the lease requests asked in one tick go to Redis as
 * one script run (on a Cluster one per slot: each request's keys share a slot), as a tick's
 * exact decisions share one (batch.ts). With `batch: false`, each request is its own run.
 */
import type { StoreOp } from '@tollgate/core';
import { type LeaseAnswer, type LeaseRequest, leaseArgs, parseLease } from '../args.js';
import type { RedisPort } from '../client.js';
import { slotOf } from '../keys.js';
import { runScript } from '../script.js';

/** Most ops leased by one script run (as batch.ts bounds a decide run). */
const LEASE_MAX_OPS = 256;

interface Asked extends LeaseRequest {
  readonly keys: readonly string[];
  readonly resolve: (a: LeaseAnswer) => void;
  readonly reject: (err: unknown) => void;
}

export class LeaseCalls {
  readonly #port: RedisPort;
  readonly #minTtl: string;
  readonly #share: number;
  readonly #batch: boolean;
  /** The requests of this tick. */
  #asked: Asked[] = [];

  constructor(port: RedisPort, minTtl: string, share: number, batch: boolean) {
    this.#port = port;
    this.#minTtl = minTtl;
    this.#share = share;
    this.#batch = batch;
  }

  /** A lease request: answered from its tick's run (its keys share a slot; no key is in two requests of a tick). */
  lease(ops: readonly StoreOp[], keys: readonly string[], now: number | undefined, most: number): Promise<LeaseAnswer> {
    return new Promise<LeaseAnswer>((resolve, reject) => {
      const q: Asked = { ops, keys, now, most, resolve, reject };
      if (!this.#batch) {
        this.#send([q]);
        return;
      }
      if (this.#asked.push(q) === 1) process.nextTick(this.#flush);
    });
  }

  readonly #flush = (): void => {
    const all = this.#asked;
    this.#asked = [];
    if (all.length === 1) {
      this.#send(all);
      return;
    }
    // Requests by slot (one group on a standalone server), each group in runs of bounded size.
    const groups = new Map<number, Asked[]>();
    for (const q of all) {
      const slot = this.#port.cluster ? slotOf(q.keys[0] as string) : 0;
      const g = groups.get(slot);
      if (g === undefined) groups.set(slot, [q]);
      else g.push(q);
    }
    for (const g of groups.values()) {
      let run: Asked[] = [];
      let ops = 0;
      // The script reads every key before it writes: a key asked twice (which the leases'
      // wait for a call in flight rules out) would start a new run rather than be read stale.
      const seen = new Set<string>();
      for (const q of g) {
        if (run.length > 0 && (ops + q.ops.length > LEASE_MAX_OPS || q.keys.some((k) => seen.has(k)))) {
          this.#send(run);
          run = [];
          ops = 0;
          seen.clear();
        }
        run.push(q);
        ops += q.ops.length;
        for (const k of q.keys) seen.add(k);
      }
      this.#send(run);
    }
  };

  /** One script run for `run`'s requests; each gets its answer, or the run's failure. */
  #send(run: readonly Asked[]): void {
    let reply: Promise<unknown>;
    const sizes = run.map((q) => q.ops.length);
    try {
      const keys: string[] = [];
      for (const q of run) for (const k of q.keys) keys.push(k);
      reply = runScript(this.#port, leaseArgs(run, keys, this.#share, this.#minTtl));
    } catch (err) {
      for (const q of run) q.reject(err);
      return;
    }
    reply.then(
      (r) => {
        let answers: LeaseAnswer[];
        try {
          answers = parseLease(r, sizes);
        } catch (err) {
          for (const q of run) q.reject(err);
          return;
        }
        for (let j = 0; j < run.length; j++) (run[j] as Asked).resolve(answers[j] as LeaseAnswer);
      },
      (err: unknown) => {
        for (const q of run) q.reject(err);
      },
    );
  }
}

/**
 * What a lease call granted beyond each op's cost (a late answer gives it back), with the
 * ops' keys; none for a key `dropped` (reset since: the surplus went with its state).
 */
export function beyondCost(
  ops: readonly StoreOp[],
  keys: readonly string[],
  grants: readonly number[],
  dropped: (key: string) => boolean,
): { ops: StoreOp[]; keys: string[] } {
  const back: StoreOp[] = [];
  const backKeys: string[] = [];
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as StoreOp;
    const extra = (grants[i] as number) - op.cost;
    if (extra <= 0 || dropped(keys[i] as string)) continue;
    back.push({ ...op, cost: extra });
    backKeys.push(keys[i] as string);
  }
  return { ops: back, keys: backKeys };
}
