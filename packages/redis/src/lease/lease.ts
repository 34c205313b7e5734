/**
 * One lease: units of a (rule, key) counted in Redis ahead of use, what this instance holds
 * of them, and the pure functions that read it (whether it is live, the figures of a
 * decision taken from it, how long it may be used). See leases.ts for how leases are used.
 */
import { type Outcome, type RuleSpec, registry, type StoreOp } from '@tollgate/core';

export interface Lease {
  readonly rule: RuleSpec;
  readonly key: string;
  readonly raw: string | undefined;
  /** The time Redis counted the units at (Redis time, or the supplied time). */
  readonly at: number;
  /** Whether `at` is supplied time. */
  readonly given: boolean;
  /** Date.now() when the call was sent: before Redis counted the units. */
  readonly localAt: number;
  /** How long it may be used: `ttl`, or less (a fixed window's end). */
  readonly span: number;
  readonly granted: number;
  left: number;
  /** Units decided from it (less those given back to it): the next lease's size follows. */
  used: number;
  /** Redis' figures right after the lease: remaining then, and resetMs. */
  readonly remaining: number;
  readonly resetMs: number;
  /** Ended: its unused units were given back (or are being). */
  dead: boolean;
  /** Ended by a `reset` here: its units went with the key's state, so none of them goes back. */
  dropped: boolean;
}

/** A rule leases unless it delays (a leaky queue) or only observes (dry run). */
export function leasable(rule: RuleSpec): boolean {
  return !registry[rule.algorithm].delays(rule) && !rule.dryRun;
}

/** Whether less than the lease's span has passed on the local clock since its call (`p`: Date.now()). */
export function fresh(l: Lease, p: number): boolean {
  return p >= l.localAt && p - l.localAt < l.span;
}

/**
 * Whether a lease may be used at supplied time `t` (undefined: Redis time), `p` being
 * Date.now(): the clock MemoryStore decides on, read once per decision (performance.now()
 * costs more). A wall clock stepping back to before the lease's call ends the lease.
 */
export function liveAt(l: Lease, t: number | undefined, p: number): boolean {
  if (!fresh(l, p)) return false;
  if (t === undefined) return !l.given;
  // Supplied time: a clock stepping back before the lease, or past its end, ends it.
  return l.given && t >= l.at && t - l.at < l.span;
}

/**
 * The time of a decision from a lease: the supplied time, or on Redis time the lease's
 * plus the whole ms elapsed locally since its call was sent (Redis' TIME is whole ms).
 */
export function timeIn(l: Lease, t: number | undefined): number {
  return t ?? l.at + (Date.now() - l.localAt);
}

/** A leased admission's figures at `at`: Redis' remaining at lease time plus the units still held. */
export function outcomeOf(l: Lease, at: number): Outcome {
  return {
    allowed: true,
    remaining: l.remaining + l.left,
    resetMs: Math.max(0, l.resetMs - (at - l.at)),
    retryAfterMs: 0,
    delayMs: 0,
    reason: undefined,
  };
}

/**
 * How long a lease counted at `at` may be used: `ttl`, and for a window's counts no longer
 * than the window or block they were counted in (the registry's `periodEnd`), so no unit
 * crosses into the next.
 */
export function spanOf(rule: RuleSpec, ttl: number, at: number, resetMs: number): number {
  return Math.min(ttl, registry[rule.algorithm].periodEnd(rule, at, resetMs) - at);
}

/** The op giving `cost` units of a lease back. */
export function opOf(l: Lease, cost: number): StoreOp {
  return l.raw === undefined ? { rule: l.rule, key: l.key, cost } : { rule: l.rule, key: l.key, raw: l.raw, cost };
}

export function distinct(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) for (let j = 0; j < i; j++) if (keys[i] === keys[j]) return false;
  return true;
}
