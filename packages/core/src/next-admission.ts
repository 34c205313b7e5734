/**
 * The exact `t` of a draft-10 `RateLimit` item when `r` is 0: "the time until
 * the next request of cost 1 would be admitted".
 *
 * A refused rule already carries it (`retryAfterMs`). An admitted request that took a
 * rule's last unit does not: its `resetMs` is the time until the whole quota is back,
 * which for a bucket or a sliding window can be far longer than the wait for one unit.
 * `nextAdmission` asks the store once, without consuming (`peek` with cost 1), for the
 * rules that need it. Algorithms whose reset is the next admission (a fixed window's end;
 * `resetIsNextAdmission` in the registry) never need it.
 * It happens at most once per rule and key as it runs dry, so the extra store call is rare.
 */
import { registry } from './algorithms/index.js';
import type { Limiter } from './limiter.js';
import type { Decision } from './types.js';

export interface NextAdmission<R> {
  /** True when `decision` has an admitted rule at r = 0 whose next admission is unknown. */
  needed(decision: Decision): boolean;
  /** Per rule of `decision`, the ms until a cost-1 request would pass (undefined: not needed). */
  get(req: R, decision: Decision): Promise<(number | undefined)[]>;
}

/** Prepares the check for one limiter (the rules whose reset is their next admission are known exact). */
export function nextAdmission<R>(limiter: Limiter<R>): NextAdmission<R> {
  // Every rule a decision may hold: the base rules and every tier's (the algorithm never changes).
  const all = [...limiter.rules, ...Object.values(limiter.tiers ?? {}).flat()];
  const exact = new Set(all.filter((c) => registry[c.spec.algorithm].resetIsNextAdmission).map((c) => c.spec.name));
  const wanted = (d: Decision, i: number): boolean => {
    const r = d.rules[i];
    return r?.allowed === true && r.remaining <= 0 && !exact.has(r.name);
  };
  return {
    needed(decision) {
      if (!decision.allowed || exact.size === all.length) return false;
      for (let i = 0; i < decision.rules.length; i++) if (wanted(decision, i)) return true;
      return false;
    },
    async get(req, decision) {
      const peeked = await limiter.peek(req, { cost: 1 });
      return decision.rules.map((r, i) => {
        if (!wanted(decision, i)) return undefined;
        const p = peeked.rules.find((x) => x.name === r.name);
        if (p === undefined) return undefined;
        return p.allowed ? 0 : p.retryAfterMs;
      });
    },
  };
}
