/**
 * What answers when Redis cannot: `'local'` decides the same ops with an
 * in-process `MemoryStore`, each rule scaled down by the expected number of instances
 * (so N instances on their own admit about what the shared limit would); `'allow'` lets
 * every request through; `'deny'` refuses it, marked `degraded: 'deny'` so the HTTP
 * layer answers 503 rather than 429.
 */
import { type Clock, MemoryStore, type Outcome, type RuleSpec, registry, type StoreDecision, type StoreOp } from '@tollgate/core';

export type StoreErrorPolicy = 'allow' | 'deny' | 'local';

const share = (n: number, instances: number): number => Math.max(1, Math.ceil(n / instances));

/** `r` with its limits divided by `instances` (rounded up, at least 1). */
export function scaleRule(r: RuleSpec, instances: number): RuleSpec {
  if (instances === 1) return r;
  const limit = share(r.limit, instances);
  const burst = share(r.burst, instances);
  const queue = share(r.queue, instances);
  const maxCost = registry[r.algorithm].maxCost({ limit, burst, queue, mode: r.mode });
  return { ...r, limit, burst, queue, maxCost };
}

export class LocalFallback {
  readonly store: MemoryStore;
  readonly instances: number;
  readonly #scaled = new WeakMap<RuleSpec, RuleSpec>();

  constructor(instances: number, clock: Clock | undefined) {
    this.instances = instances;
    this.store = new MemoryStore(clock ? { clock } : {});
  }

  ops(ops: readonly StoreOp[]): StoreOp[] {
    return ops.map((op) => {
      let r = this.#scaled.get(op.rule);
      if (r === undefined) {
        r = scaleRule(op.rule, this.instances);
        this.#scaled.set(op.rule, r);
      }
      return { rule: r, key: op.key, cost: op.cost };
    });
  }
}

/** The answer of `'allow'`: every rule admits; figures unknown, reported as a full quota. */
export function allowAll(ops: readonly StoreOp[], now: number): StoreDecision {
  const outcomes: Outcome[] = ops.map((op) => ({
    allowed: true,
    remaining: op.rule.limit,
    resetMs: 0,
    retryAfterMs: 0,
    delayMs: 0,
    reason: undefined,
  }));
  return { allowed: true, now, outcomes, degraded: 'allow' };
}

/** The answer of `'deny'`: refused (503 at the HTTP layer) until the breaker probes again. */
export function denyAll(ops: readonly StoreOp[], now: number, retryAfterMs: number): StoreDecision {
  const outcomes: Outcome[] = ops.map(() => ({
    allowed: false,
    remaining: 0,
    resetMs: retryAfterMs,
    retryAfterMs,
    delayMs: 0,
    reason: undefined,
  }));
  return { allowed: false, now, outcomes, degraded: 'deny' };
}
