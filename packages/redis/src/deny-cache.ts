/**
 * The local deny cache: a stack that Redis rejected until T is rejected again
 * locally until T, without a round trip.
 *
 * Exact with respect to what the store decided: an entry is made only from Redis' own
 * rejection, lives until the earliest time any of its rejecting rules, dry-run ones
 * included, could admit (so every rule that rejected still rejects throughout), and only when skipping Redis has
 * no side effect Redis would have had: no rule of the stack counts rejected requests,
 * and every rule with `blockFor` has just started its block (a blocked rule writes
 * nothing, so the entry lives at most until that block ends); a block an operator set on a
 * rule without `blockFor` is never cached (its end is not in the answer). The answer's per-rule figures are those of the store's
 * answer with time shifted; `remaining` of a rule is as of that answer. A refund, reset or
 * operation by key through this store drops the entries of its keys; one made elsewhere
 * (another instance, `tollgate keys`) is seen when the entry runs out: at the retry time
 * the store reported, and never more than `DENY_CACHE_MAX_AGE_MS` after Redis' answer, so
 * an operator's unblock or reset reaches every instance within that bound rather than at
 * the end of the block (or the day, for a daily quota).
 */
import type { Outcome, RuleSpec, StoreDecision, StoreOp } from '@tollgate/core';

/** The longest an entry answers for Redis (ms): how soon a change made elsewhere is seen. */
export const DENY_CACHE_MAX_AGE_MS = 1000;

/**
 * A number per compiled rule, for the deny cache's signature: rules of different limiters
 * may share a name, and so a Redis key, while their limits differ.
 */
const ruleIds = new WeakMap<RuleSpec, number>();
let nextRuleId = 0;
function ruleIdOf(r: RuleSpec): number {
  let id = ruleIds.get(r);
  if (id === undefined) {
    id = nextRuleId++;
    ruleIds.set(r, id);
  }
  return id;
}

/**
 * The deny cache's signature of a stack: its keys, rules and costs. A cached rejection
 * answers only the same rules (not just the same keys) at the same costs.
 */
export function signature(ops: readonly StoreOp[], keys: readonly string[]): string {
  let sig = keys.join('\n');
  for (const op of ops) sig += ` ${ruleIdOf(op.rule)}:${op.cost}`;
  return sig;
}

interface CacheEntry {
  /** The decision's time (store timebase) and the local time it was received at. */
  at: number;
  localAt: number;
  /** Whether time was supplied (`now` passed) or Redis' own. */
  given: boolean;
  until: number;
  decision: StoreDecision;
}

export class DenyCache {
  readonly maxEntries: number;
  readonly #map = new Map<string, CacheEntry>();
  /** The signatures remembered per Redis key, so a write to the key drops them. */
  readonly #byKey = new Map<string, string[]>();
  readonly #localNow: () => number;

  constructor(maxEntries: number, localNow: () => number) {
    this.maxEntries = maxEntries;
    this.#localNow = localNow;
  }

  get size(): number {
    return this.#map.size;
  }

  /** A local rejection for this stack at `now`, or undefined to ask Redis. */
  get(sig: string, now: number | undefined): StoreDecision | undefined {
    const e = this.#map.get(sig);
    if (e === undefined) return undefined;
    const given = now !== undefined;
    // On Redis time, the time elapsed locally in whole ms (Redis' TIME is read in whole ms):
    // the answer's figures are whole ms like Redis' own, never 287.58.
    const t = given ? now : e.at + Math.floor(this.#localNow() - e.localAt);
    if (given !== e.given || t >= e.until || t < e.at) {
      this.#map.delete(sig);
      return undefined;
    }
    const shift = t - e.at;
    const outcomes: Outcome[] = e.decision.outcomes.map((o) => ({
      allowed: o.allowed,
      remaining: o.remaining,
      resetMs: Math.max(0, o.resetMs - shift),
      retryAfterMs: o.allowed ? 0 : Math.max(0, o.retryAfterMs - shift),
      delayMs: 0,
      reason: o.reason,
    }));
    return { allowed: false, now: t, outcomes };
  }

  /**
   * Forgets the rejections of every stack that shares a key with a decision that wrote
   * (an admission, a penalty or a block): its figures describe a state that is gone. Without
   * this, a cost-1 rejection replayed after a cost-2 admission on the same key reported the
   * wait from before that admission.
   */
  written(keys: readonly string[]): void {
    for (const k of keys) {
      const sigs = this.#byKey.get(k);
      if (sigs === undefined) continue;
      for (const sig of sigs) this.#map.delete(sig);
      this.#byKey.delete(k);
    }
  }

  /** Records a rejection Redis made, when it may be answered locally later. */
  remember(sig: string, ops: readonly StoreOp[], keys: readonly string[], d: StoreDecision, given: boolean): void {
    if (d.allowed) return;
    let until = Number.POSITIVE_INFINITY;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const o = d.outcomes[i] as Outcome;
      if (op.rule.countRejected) return;
      // A block on a rule without blockFor was set by an operator (limiter.block,
      // `tollgate keys block`): the answer does not say when it ends, and after that the
      // same refusal is the limit's, so it is not answered locally.
      if (o.reason === 'blocked' && op.rule.blockForMs === 0) return;
      if (op.rule.blockForMs > 0 && o.reason !== 'cost_exceeds_limit') {
        // A rule that blocks writes a new block whenever it rejects, unless it is blocked.
        // Its block runs from this rejection only when the rejection was its own ('limit'),
        // so that is the one case whose block end is known.
        if (o.reason !== 'limit') return;
        until = Math.min(until, d.now + op.rule.blockForMs);
      }
      // A dry-run rule's refusal too: replayed past its retry time, it would still say refused.
      if (!o.allowed && o.retryAfterMs > 0) until = Math.min(until, d.now + o.retryAfterMs);
    }
    if (until === Number.POSITIVE_INFINITY) return;
    until = Math.min(until, d.now + DENY_CACHE_MAX_AGE_MS);
    if (until <= d.now) return;
    if (this.#map.size >= this.maxEntries) {
      const oldest = this.#map.keys().next();
      if (!oldest.done) this.#map.delete(oldest.value);
    }
    // Replayed answers come during the block a blocking rule just started: Redis would say
    // 'blocked' for it from now on.
    const outcomes = d.outcomes.map((o, i) =>
      (ops[i] as StoreOp).rule.blockForMs > 0 && o.reason === 'limit' ? { ...o, reason: 'blocked' as const } : o,
    );
    this.#map.set(sig, { at: d.now, localAt: this.#localNow(), given, until, decision: { ...d, outcomes } });
    // The index keeps signatures of entries since dropped; it is emptied (with the cache)
    // before it outgrows a few per entry.
    if (this.#byKey.size >= 4 * this.maxEntries) this.clear();
    for (const k of keys) {
      const sigs = this.#byKey.get(k);
      if (sigs === undefined) this.#byKey.set(k, [sig]);
      else if (!sigs.includes(sig)) sigs.push(sig);
    }
  }

  clear(): void {
    this.#map.clear();
    this.#byKey.clear();
  }
}
