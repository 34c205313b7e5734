/**
 * Operations on one (rule, key) state without a request: read it, block and unblock it,
 * penalize and reward it. Pure functions of (entry, now, rule), shared by every store that
 * decides in JavaScript; the Redis store's Lua (`redis/src/lua/keyops.ts`) mirrors them
 * line for line, and a property test holds the two to the same answers.
 *
 * What each operation means, per algorithm (docs/operations.md):
 * - `penalize(units)` consumes up to `units` of what the key has left now, exactly as an
 *   admitted request of that cost would (the algorithm's own `check`): never beyond empty,
 *   so it never creates a debt that outlasts the rule's own recovery (`block` is for that).
 * - `reward(units)` gives back up to `units` of what the key has used, never beyond a full
 *   budget (no credit): a fixed window's count, a token bucket's tokens (capped at its
 *   burst), a leaky bucket's level or queue places (the stored time moves back, never
 *   before now), a sliding window's estimate (the current window's count first, then the
 *   previous window's weight), a sliding log's newest entries first, a sliding-buckets
 *   rule's newest blocks first.
 * - `block(ms)` sets the same block deadline `blockFor` sets (never shortening one already
 *   later); `unblock` clears it and leaves the counter as it is.
 */
import { algorithms, registry, type State, uncounted } from './algorithms/index.js';
import { type Entry, entryExpiresAt } from './stack.js';
import type { KeyOp, RuleSpec, StoreKeyState } from './types.js';

/** The figures of an entry at `now` (see StoreKeyState). */
export function keyFigures(e: Entry | undefined, now: number, r: RuleSpec): StoreKeyState {
  const alg = algorithms[r.algorithm];
  const s = e?.s;
  const q = uncounted(r);
  const c0 = alg.check(s, now, q, 0);
  const c1 = alg.check(s, now, q, 1);
  const b = e !== undefined && e.b > now ? e.b : 0;
  const retry = c1.allowed ? 0 : c1.retryAfterMs;
  return {
    now,
    // A state that decides like none (expired) is none: the store drops it when writing.
    exists: e !== undefined && entryExpiresAt(e, r) > now,
    remaining: b > 0 ? 0 : Math.max(0, c0.remaining),
    resetMs: Math.max(c0.resetMs, b > 0 ? b - now : 0),
    retryAfterMs: b > 0 ? Math.max(b - now, retry) : retry,
    blockedUntil: b,
  };
}

/**
 * The entry after `op` at `now`: `undefined` for no state at all (the store deletes it).
 * `get` returns the entry unchanged. A result that decides like no state (expired) is for
 * the store to drop, as after any write.
 */
export function applyKeyOp(e: Entry | undefined, now: number, r: RuleSpec, op: KeyOp): Entry | undefined {
  const s = e?.s;
  const b = e?.b ?? 0;
  switch (op.kind) {
    case 'get':
      return e;
    case 'block':
      return { s, b: Math.max(b, now + op.ms) };
    case 'unblock':
      return s === undefined ? undefined : { s, b: 0 };
    case 'penalize': {
      const next = penalized(s, now, r, op.units);
      return next === undefined && b === 0 ? undefined : { s: next, b };
    }
    case 'reward': {
      if (s === undefined) return e;
      const next = registry[r.algorithm].reward(s, now, r, op.units);
      return next === undefined && b === 0 ? undefined : { s: next, b };
    }
  }
}

/** The state after consuming up to `units` of what is left now (never beyond empty). */
function penalized(s: State | undefined, now: number, r: RuleSpec, units: number): State | undefined {
  const alg = algorithms[r.algorithm];
  // `remaining` of a cost-0 check is the largest cost the rule admits now; a leaky bucket
  // computes it in floating point, so a cost it refuses by a rounding step is tried one lower.
  for (let k = Math.min(units, Math.max(0, alg.check(s, now, r, 0).remaining)); k > 0; k--) {
    const c = alg.check(s, now, r, k);
    if (c.allowed) return c.next;
  }
  return s;
}

/** How long a store remembers an operation id (a retry within it changes nothing more). */
export const OPERATION_ID_TTL_MS = 86_400_000;
/** Most operation ids a MemoryStore remembers (the oldest is forgotten first). */
const IDS_MAX = 10_000;

/**
 * The operation ids a store has applied, per (rule, key): `first` says whether an op is
 * the first with its id within OPERATION_ID_TTL_MS (then it is applied and remembered).
 */
export class AppliedIds {
  readonly #until = new Map<string, number>();

  first(r: RuleSpec, key: string, op: KeyOp, now: number): boolean {
    if (op.kind === 'get' || op.id === undefined) return true;
    const mark = `${r.id}\n${key}\n${op.id}`;
    const until = this.#until.get(mark);
    if (until !== undefined && until > now) return false;
    this.#until.delete(mark);
    if (this.#until.size >= IDS_MAX) this.#until.delete(this.#until.keys().next().value as string);
    this.#until.set(mark, now + OPERATION_ID_TTL_MS);
    return true;
  }

  clear(): void {
    this.#until.clear();
  }
}
