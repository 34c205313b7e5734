/**
 * A decision as the limiter hands it out: each rule's figures from the store's outcomes,
 * and the receipt of what an admission consumed (for refunds and settles).
 */
import { channels, DURATION } from './diagnostics.js';
import type { ReservationEngine } from './reserve.js';
import type { Decision, RuleResult, StoreDecision, StoreOp } from './types.js';

const RECEIPT = Symbol('tollgate.receipt');
/** The rule names of a decision already given back: a unit is refunded at most once. */
const REFUNDED = Symbol('tollgate.refunded');
type WithReceipt = Decision & { [RECEIPT]?: StoreOp[]; [REFUNDED]?: Set<string> };

/** What an admitted decision consumed, rule by rule (undefined for a refusal). */
export function decisionOps(decision: Decision): readonly StoreOp[] | undefined {
  return (decision as WithReceipt)[RECEIPT];
}

/** Each limiter's reservation engine, for the HTTP pipeline's settles (`settleDecision`). */
export const engines = new WeakMap<object, ReservationEngine>();

/** The reservation engine of a limiter made by `createLimiter`. */
export function reservationEngine(lim: object): ReservationEngine | undefined {
  return engines.get(lim);
}

/**
 * The ops of an admitted decision not given back yet (only `names`' when given), marked as
 * given back: a rule's units go back at most once, whichever path asks first (a refusal's
 * refund, an uncounted status, a settle). A rule that did not admit (a dry-run refusal)
 * consumed nothing and is left out, and so is every rule of a decision the store's failure
 * policy allowed (`degraded: 'allow'`).
 */
export function claimOps(decision: Decision, names?: readonly string[]): StoreOp[] {
  const w = decision as WithReceipt;
  let ops = w[RECEIPT];
  // A failure policy's 'allow' counted nothing: giving its units back would credit units never taken.
  if (!ops || !decision.allowed || decision.degraded === 'allow') return [];
  if (names) {
    const only = new Set(names);
    ops = ops.filter((op) => only.has(op.rule.name));
  }
  const admitted = new Set(decision.rules.filter((r) => r.allowed).map((r) => r.name));
  const done = w[REFUNDED] ?? new Set<string>();
  ops = ops.filter((op) => admitted.has(op.rule.name) && !done.has(op.rule.name));
  for (const op of ops) done.add(op.rule.name);
  w[REFUNDED] = done;
  return ops;
}

/**
 * After a store call with claimed ops failed: one refused before doing anything (a clock
 * that gave no time) changed nothing, so the units may still be given back later. Any other
 * failure (a timeout, say) may have reached the store, so the claim stays spent.
 */
export function unclaimOnInvalidTime(decision: Decision, ops: readonly StoreOp[], err: unknown): void {
  if ((err as { code?: unknown } | null)?.code !== 'TG_INVALID_TIME') return;
  const done = (decision as WithReceipt)[REFUNDED];
  if (done !== undefined) for (const op of ops) done.delete(op.rule.name);
}

const NONE: string[] = Object.freeze([]) as unknown as string[];

export function finish(ops: StoreOp[], d: StoreDecision, startedAt: number): Decision {
  const decision = toResults(ops, d, ops);
  if (startedAt >= 0) (decision as Decision & { [DURATION]?: number })[DURATION] = performance.now() - startedAt;
  return decision;
}

/** When a decision starts, for its duration on `tollgate:decision`; -1 (no clock read) when nobody listens. */
export function started(): number {
  return channels.decision.hasSubscribers ? performance.now() : -1;
}

/** The decision a store's answer makes; `receipt`: the ops an admission consumed (not for a peek). */
export function toResults(ops: readonly StoreOp[], d: StoreDecision, receipt?: StoreOp[]): Decision {
  const rules: RuleResult[] = new Array(ops.length);
  let rejectedBy = NONE;
  let dryRunRejectedBy = NONE;
  let retryAfterMs = 0;
  let delayMs = 0;
  // A rule that can never admit this cost makes waiting pointless for the whole request.
  let hopeless = false;
  for (let i = 0; i < ops.length; i++) {
    const spec = (ops[i] as StoreOp).rule;
    const o = d.outcomes[i] as StoreDecision['outcomes'][number];
    const r: RuleResult = {
      name: spec.name,
      allowed: o.allowed,
      limit: spec.limit,
      remaining: o.remaining,
      windowMs: spec.windowMs,
      resetMs: o.resetMs,
      retryAfterMs: o.retryAfterMs,
      delayMs: o.delayMs,
    };
    if (o.reason !== undefined) r.reason = o.reason;
    if (spec.dryRun) r.dryRun = true;
    rules[i] = r;
    if (!o.allowed) {
      if (spec.dryRun) {
        if (dryRunRejectedBy === NONE) dryRunRejectedBy = [];
        dryRunRejectedBy.push(spec.name);
      } else {
        if (rejectedBy === NONE) rejectedBy = [];
        rejectedBy.push(spec.name);
        if (o.reason === 'cost_exceeds_limit') hopeless = true;
        if (o.retryAfterMs > retryAfterMs) retryAfterMs = o.retryAfterMs;
      }
    } else if (!spec.dryRun && o.delayMs > delayMs) delayMs = o.delayMs; // dry-run never delays
  }
  // An admission's receipt is made with the object: added afterwards, it cost a map
  // transition and a property array per decision (about 5% of a four-rule stack's
  // instructions). Refusals and peeks carry none, as before.
  const decision: Decision =
    receipt !== undefined && d.allowed
      ? ({ allowed: true, delayMs, retryAfterMs: 0, rejectedBy, dryRunRejectedBy, rules, at: d.now, [RECEIPT]: receipt } as WithReceipt)
      : {
          allowed: d.allowed,
          delayMs: d.allowed ? delayMs : 0,
          retryAfterMs: d.allowed || hopeless ? 0 : retryAfterMs,
          rejectedBy,
          dryRunRejectedBy,
          rules,
          at: d.now,
        };
  if (d.degraded !== undefined) decision.degraded = d.degraded;
  return decision;
}
