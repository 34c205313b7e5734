/**
 * A lease call guarded as the store guards a decision (redis-store.ts): the deny cache may
 * answer it, the breaker may send it to the failure policy, and it races the store's
 * deadline. Grants come back only when Redis decided; a call answered after its deadline
 * gives back what it leased beyond the request's cost. This is the `lease` hook of the
 * leases (leases.ts).
 */
import type { StoreDecision, StoreOp } from '@tollgate/core';
import type { LeaseAnswer } from '../args.js';
import type { Breaker } from '../breaker.js';
import { type DenyCache, signature } from '../deny-cache.js';
import { beyondCost, type LeaseCalls } from './calls.js';
import type { LeaseHost } from './leases.js';

/** The store's machinery a lease call goes through. */
export interface LeaseGuardHost {
  /** A tick's lease calls as one script run. */
  readonly calls: LeaseCalls;
  readonly deny: DenyCache | undefined;
  readonly breaker: Breaker;
  closed(): boolean;
  /** `p` raced against the store's `timeoutMs`. */
  deadline<T>(p: Promise<T>): Promise<T>;
  /** The failure policy's answer to a consume of `ops`. */
  degraded(ops: readonly StoreOp[], t: number | undefined): Promise<StoreDecision>;
  /** The bookkeeping of a consume Redis decided (breaker, deny cache). */
  answered(ops: readonly StoreOp[], keys: readonly string[], t: number | undefined, d: StoreDecision): void;
  /** A failure reported: the lease call's (`consume`, answered by the policy) or a late give-back's (`refund`). */
  failed(err: unknown, operation: 'consume' | 'refund'): void;
  /** Gives `ops` back in Redis as a refund of a decision made at `at` (one call per slot). */
  refund(ops: readonly StoreOp[], keys: string[], at: number, t: number | undefined): Promise<void>;
  /** The time units counted at supplied time `t` go back at (Leases.giveBackTime). */
  giveBackTime(t: number | undefined): number | undefined;
  /** A call past its deadline, settled when its answer is handled: which keys were reset here since (Leases.late). */
  late(answered: Promise<void>): (key: string) => boolean;
}

/** The leases' `lease` hook over the store's machinery. */
export function guardedLeaseCall(host: LeaseGuardHost): LeaseHost['lease'] {
  /**
   * A lease call answered after its deadline (the failure policy answered the request):
   * the units it leased beyond the request's cost go back, so it costs what an exact call
   * answered late costs. Sent whatever the breaker says: Redis has just answered.
   */
  function returnLate(
    ops: readonly StoreOp[],
    keys: readonly string[],
    late: LeaseAnswer,
    t: number | undefined,
    dropped: (key: string) => boolean,
  ): void {
    if (!late.d.allowed || host.closed()) return;
    const back = beyondCost(ops, keys, late.grants, dropped);
    if (back.ops.length === 0) return;
    host.deny?.written(back.keys);
    // At the latest supplied time: the clock may have moved on while the answer was late.
    host.deadline(host.refund(back.ops, back.keys, late.d.now, host.giveBackTime(t))).then(
      () => host.breaker.success(),
      (err: unknown) => host.failed(err, 'refund'),
    );
  }

  return async function leaseCall(ops, keys, t, most) {
    const deny = host.deny;
    if (deny !== undefined && deny.size > 0) {
      const hit = deny.get(signature(ops, keys), t);
      if (hit !== undefined) return { d: hit, grants: undefined };
    }
    if (!host.breaker.tryCall()) return { d: await host.degraded(ops, t), grants: undefined };
    let r: LeaseAnswer;
    const call = host.calls.lease(ops, keys, t, most);
    try {
      r = await host.deadline(call);
    } catch (err) {
      host.failed(err, 'consume');
      // Redis may still run it: what it leased beyond the cost goes back, but for keys reset here since.
      let dropped: (key: string) => boolean = () => false;
      dropped = host.late(
        call.then(
          (late) => returnLate(ops, keys, late, t, dropped),
          () => {},
        ),
      );
      return { d: await host.degraded(ops, t), grants: undefined };
    }
    host.answered(ops, keys, t, r.d);
    return r;
  };
}
