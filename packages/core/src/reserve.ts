/**
 * Reservations: a decision on an estimated cost, settled once the actual cost is known
 * (tokens generated, bytes sent, a query's complexity). Built on the engine's own pieces:
 * `reserve` is a `consume` of the estimate, and `settle` is one store call per reservation
 * (`Store.settle`) that gives back what the estimate over-charged, as a refund does, or
 * charges what it under-charged without refusing (a debt that later requests wait out).
 */
import { TollgateError } from './errors.js';
import type { Decision, RuleSpec, Store, StoreOp } from './types.js';

/**
 * A reservation made by `limiter.reserve`. At most one `settle` (or `cancel`); one never
 * settled stays charged at its estimate.
 */
export interface Reservation {
  /** Whether the estimate was admitted (as `decision.allowed`). */
  readonly allowed: boolean;
  /** The decision on the estimate, exactly as `consume` makes it. */
  readonly decision: Decision;
  /** Whether `settle` or `cancel` has been called (successfully or still under way). */
  readonly settled: boolean;
  /**
   * Settles every rule at the actual cost: less than the estimate gives the difference
   * back (never more than the reservation still weighs); more charges the difference
   * without refusing, which may leave the key in debt. A fractional cost counts as the next
   * whole unit.
   * @throws TG_INVALID_ACTUAL_COST for a cost that is not a finite number of at least 0, or
   * beyond 1000 times what a rule can ever admit (the reservation stays open);
   * TG_ALREADY_SETTLED on a second call; TG_RESERVATION_REFUSED when the estimate was refused.
   */
  settle(actual: number): Promise<void>;
  /** The same as `settle(0)`: gives back what the reservation still weighs. */
  cancel(): Promise<void>;
}

/** How many times what a rule can ever admit an actual cost may reach (beyond: a mistake, not a cost). */
export const ACTUAL_COST_FACTOR = 1000;

/** The largest actual cost a reservation on rule `r` accepts. */
export function actualCostMax(r: RuleSpec): number {
  return ACTUAL_COST_FACTOR * r.maxCost;
}

/** The store cannot settle: `reserve` fails before consuming anything. */
export function settleUnsupported(store: Store): TollgateError {
  const name = (store as { constructor?: { name?: unknown } }).constructor?.name;
  return new TollgateError(
    'TG_STORE_UNSUPPORTED',
    `reserve: the store (${typeof name === 'string' ? name : 'a custom store'}) has no settle, so a reservation could never be settled. ` +
      'Use MemoryStore or RedisStore, or implement Store.settle (see docs/reserve.md).',
  );
}

function invalidActual(actual: unknown, why: string): TollgateError {
  const shown = typeof actual === 'number' ? String(actual) : typeof actual;
  return new TollgateError(
    'TG_INVALID_ACTUAL_COST',
    `settle: expected an actual cost that is a finite number of at least 0${why}, received ${shown}. ` +
      'Pass the units the work really used (tokens, bytes); the reservation is still open and charged at its estimate.',
  );
}

/** The actual cost as whole units for rule `r`, or the coded error it deserves. */
export function actualUnits(actual: unknown, r: RuleSpec): number {
  if (typeof actual !== 'number' || !(actual >= 0) || actual === Number.POSITIVE_INFINITY) throw invalidActual(actual, '');
  const units = Math.ceil(actual);
  const max = actualCostMax(r);
  if (units > max) throw invalidActual(actual, ` and at most ${max} for rule ${JSON.stringify(r.name)} (1000 times its largest cost)`);
  return units;
}

/**
 * Settles decision `d`'s rules for which `actualFor` gives an actual cost (validated first,
 * all or nothing: a bad one throws before anything is claimed); other rules are left as
 * they are. Rules given back already (a refund, an earlier settle) are not settled again.
 */
export async function settleDecision(d: Decision, engine: ReservationEngine, actualFor: (op: StoreOp) => unknown): Promise<void> {
  const units = new Map<string, number>();
  for (const op of engine.opsOf(d)) {
    const a = actualFor(op);
    if (a !== undefined) units.set(op.rule.name, actualUnits(a, op.rule));
  }
  if (units.size === 0) return;
  const settle = engine.store.settle;
  if (typeof settle !== 'function') throw settleUnsupported(engine.store);
  const ops = engine.claim(d, [...units.keys()]);
  const deltas: StoreOp[] = [];
  for (const op of ops) {
    const u = units.get(op.rule.name) as number;
    if (u !== op.cost) deltas.push(withCost(op, u - op.cost));
  }
  if (deltas.length === 0) return;
  try {
    await settle.call(engine.store, deltas, d.at, engine.now(), d.degraded === 'local' ? 'local' : undefined);
  } catch (err) {
    engine.unclaim(d, ops, err);
    throw err;
  }
}

/** What a reservation needs of its limiter's engine. */
export interface ReservationEngine {
  readonly store: Store;
  /** The limiter's clock reading (undefined: the store's own time). */
  now(): number | undefined;
  /** Every op the decision consumed (its receipt). */
  opsOf(d: Decision): readonly StoreOp[];
  /** Takes the decision's ops not given back yet (of `names`), marking them (a later refund gives nothing twice). */
  claim(d: Decision, names?: readonly string[]): StoreOp[];
  /** Undoes `claim` after a store call that changed nothing (see unclaimOnInvalidTime). */
  unclaim(d: Decision, ops: readonly StoreOp[], err: unknown): void;
}

/** The coded error of a second settle. */
export function alreadySettled(): TollgateError {
  return new TollgateError(
    'TG_ALREADY_SETTLED',
    'settle: the reservation has already been settled or cancelled; a reservation settles once. Keep one settle per reservation.',
  );
}

/** The reservation of decision `d`. */
export function createReservation(d: Decision, engine: ReservationEngine): Reservation {
  let settled = false;
  async function settle(actual: number): Promise<void> {
    if (!d.allowed) {
      throw new TollgateError(
        'TG_RESERVATION_REFUSED',
        'settle: the reservation was refused, so it reserved nothing to settle. Check reservation.allowed before doing the work.',
      );
    }
    if (settled) throw alreadySettled();
    // Validated before the reservation counts as settled: a bad cost leaves it open.
    for (const op of engine.opsOf(d)) actualUnits(actual, op.rule);
    settled = true;
    try {
      await settleDecision(d, engine, () => actual);
    } catch (err) {
      // Nothing reached the store (a clock that gave no time): the reservation is still open.
      if ((err as { code?: unknown } | null)?.code === 'TG_INVALID_TIME') settled = false;
      throw err;
    }
  }
  return {
    allowed: d.allowed,
    decision: d,
    get settled() {
      return settled;
    },
    settle,
    cancel: () => settle(0),
  };
}

/** An op with another cost (the settle's signed difference). */
function withCost(op: StoreOp, cost: number): StoreOp {
  return op.raw === undefined ? { rule: op.rule, key: op.key, cost } : { rule: op.rule, key: op.key, raw: op.raw, cost };
}
