/**
 * Operations by key, without a request: what `limiter.get / reset / block / unblock /
 * penalize / reward` do (and the adapters' objects, and the CLI's `tollgate keys`).
 *
 * A rule is named, a key is what the rule's key function would return (sanitised here with
 * the engine's own `sanitizeKey`, so the operation reaches the state requests use), and
 * every argument is validated before the store is asked: an unknown rule name, a key that
 * is not a string or number, a bad duration or a number of units that is not a positive
 * whole number is a coded error. Each operation is one atomic store call (one Redis round
 * trip) and is published on `tollgate:key-op` once it has run (or failed).
 */
import type { Clock } from './clock.js';
import { channels } from './diagnostics.js';
import { type Duration, parseDuration } from './duration.js';
import { configError, describe, TollgateError } from './errors.js';
import { sanitizeKey } from './limiter.js';
import { didYouMean } from './suggest.js';
import type { KeyOp, RuleSpec, Store, StoreKeyState } from './types.js';

/** The state of one (rule, key), as `limiter.get` and the other operations answer it. */
export interface KeyState {
  /** The rule's name. */
  rule: string;
  /** The key as given. */
  key: string;
  /** The key as the store holds it (sanitised: long or unusual keys are hashed). */
  storeKey: string;
  /** The rule's limit and window (for buckets, the refill is `limit` per `windowMs`). */
  limit: number;
  windowMs: number;
  /** The most a key can hold: the limit, a bucket's burst or a leaky queue's places. */
  capacity: number;
  /** Whole units a request could take now (0 while blocked). */
  remaining: number;
  /** ms until the full budget is back (and any block is over) if nothing else arrives. */
  resetMs: number;
  /** ms until a request of cost 1 would be admitted; 0 when it would be now. */
  retryAfterMs: number;
  /** Whether the key is blocked (by `blockFor` or `block`). */
  blocked: boolean;
  /** When the block ends (epoch ms on the store's clock), when blocked. */
  blockedUntil: number | undefined;
  /** Whether the store holds any state for the key (none: a fresh key). */
  exists: boolean;
  /** The store's time the operation ran at (ms). */
  at: number;
}

/** A key as operations take it: what the rule's key function returns. */
export type OperationKey = string | number;

/** Operations on one (rule, key) without a request. See docs/operations.md. */
export interface KeyOperations {
  /** The key's state for the rule: remaining, reset, retry and block. */
  get(rule: string, key: OperationKey): Promise<KeyState>;
  /** Forgets the key's state for the rule (a fresh budget, no block). */
  reset(rule: string, key: OperationKey): Promise<void>;
  /**
   * Refuses the key (reason `'blocked'`, with `Retry-After`) for `duration`, as `blockFor`
   * does, on any rule; a block already ending later is kept.
   */
  block(rule: string, key: OperationKey, duration: Duration): Promise<KeyState>;
  /** Lifts a block (the counter is left as it is: `reset` forgets both). */
  unblock(rule: string, key: OperationKey): Promise<KeyState>;
  /** Consumes up to `units` of what the key has left now, never beyond empty. */
  penalize(rule: string, key: OperationKey, units: number): Promise<KeyState>;
  /** Gives back up to `units` of what the key has used, never beyond a full budget. */
  reward(rule: string, key: OperationKey, units: number): Promise<KeyState>;
}

/** The operation names, as `tollgate:key-op` messages carry them. */
export type KeyOperationName = keyof KeyOperations;

/** Message on `tollgate:key-op`: an operation by key has run (or failed). */
export interface KeyOpMessage {
  operation: KeyOperationName;
  rule: string;
  /** The key as given. */
  key: string;
  /** `penalize` / `reward`: the units asked for. */
  units?: number;
  /** `block`: the block's length in ms. */
  blockMs?: number;
  /** The state after the operation (absent for `reset` and on failure). */
  state?: KeyState;
  /** Why it failed, when it did (the operation's promise rejects with it too). */
  error?: unknown;
}

/** What operations need of a limiter: its store and clock, and its rules by name. */
export interface OperationSource {
  readonly store: Store;
  readonly clock: Clock | undefined;
  /** The rule named `name`, or undefined. */
  ruleByName(name: string): RuleSpec | undefined;
  /** Every rule name, for "did you mean" in errors. */
  ruleNames(): Iterable<string>;
}

/** A key given to an operation: strings as they are, numbers as their text (as the engine keys them). */
function keyText(key: unknown, path: string): string {
  if (typeof key === 'string') return key;
  if ((typeof key === 'number' && Number.isFinite(key)) || typeof key === 'bigint') return String(key);
  throw configError('TG_INVALID_KEY', {
    path,
    expected: "a key as the rule's key function returns it: a string or a number",
    received: describe(key),
    fix: "Pass the key itself, e.g. '203.0.113.7', a user id, or ipKey(address) for an ip() rule.",
  });
}

function positiveUnits(units: unknown, path: string): number {
  if (typeof units !== 'number' || !Number.isSafeInteger(units) || units <= 0) {
    throw configError('TG_INVALID_UNITS', {
      path,
      expected: 'a number of units as a positive whole number',
      received: describe(units),
      fix: 'Pass a whole number of at least 1, e.g. 5.',
    });
  }
  return units;
}

function unsupported(store: Store, operation: string): TollgateError {
  const name = (store as { constructor?: { name?: unknown } }).constructor?.name;
  return new TollgateError(
    'TG_STORE_UNSUPPORTED',
    `${operation}: the store (${typeof name === 'string' ? name : 'a custom store'}) has no keyOp, so it cannot ${operation} a key without a request. ` +
      'Use MemoryStore or RedisStore, or implement Store.keyOp (see docs/operations.md).',
  );
}

/** The limiter-facing figures of a store's answer. */
function stateOf(r: RuleSpec, key: string, storeKey: string, s: StoreKeyState): KeyState {
  return {
    rule: r.name,
    key,
    storeKey,
    limit: r.limit,
    windowMs: r.windowMs,
    capacity: r.maxCost,
    remaining: s.remaining,
    resetMs: s.resetMs,
    retryAfterMs: s.retryAfterMs,
    blocked: s.blockedUntil > 0,
    blockedUntil: s.blockedUntil > 0 ? s.blockedUntil : undefined,
    exists: s.exists,
    at: s.now,
  };
}

function publish(message: KeyOpMessage): void {
  if (channels.keyOp.hasSubscribers) channels.keyOp.publish(message);
}

/**
 * The operations by key of a limiter, or of several together (an adapter's registrations):
 * a rule is looked up in each source in turn, and the first that has it runs the operation
 * on its own store. An array is read at every call, so sources added later are seen.
 */
export function keyOperations(from: OperationSource | readonly OperationSource[]): KeyOperations {
  const sources: readonly OperationSource[] = Array.isArray(from) ? from : [from as OperationSource];

  function names(): string[] {
    const all = new Set<string>();
    for (const src of sources) for (const n of src.ruleNames()) all.add(n);
    return [...all];
  }

  function ruleOf(name: unknown, operation: string): { rule: RuleSpec; source: OperationSource } {
    if (typeof name === 'string') {
      for (const source of sources) {
        const rule = source.ruleByName(name);
        if (rule !== undefined) return { rule, source };
      }
    }
    const known = names();
    throw configError('TG_UNKNOWN_RULE', {
      path: `${operation}.rule`,
      expected: "the name of one of the limiter's rules",
      received: describe(name),
      fix: `${didYouMean(name, known)}Name a rule of this limiter (${known.length === 0 ? 'it has none yet' : `its rules: ${known.join(', ')}`}).`,
    });
  }

  /** Runs one operation: validated arguments, the store call, the diagnostics message. */
  async function run(
    operation: KeyOperationName,
    name: unknown,
    rawKey: unknown,
    op: KeyOp | undefined,
    extra: Pick<KeyOpMessage, 'units' | 'blockMs'>,
  ): Promise<KeyState | undefined> {
    const { rule, source } = ruleOf(name, operation);
    const { store, clock } = source;
    const raw = keyText(rawKey, `${operation}.key`);
    const key = sanitizeKey(raw);
    const message: KeyOpMessage = { operation, rule: rule.name, key: raw, ...extra };
    try {
      const now = clock?.now();
      let state: KeyState | undefined;
      if (op === undefined) await store.reset(rule, key, raw);
      else {
        if (typeof store.keyOp !== 'function') throw unsupported(store, operation);
        state = stateOf(rule, raw, key, await store.keyOp(rule, key, op, now, raw));
        message.state = state;
      }
      publish(message);
      return state;
    } catch (err) {
      message.error = err;
      publish(message);
      throw err;
    }
  }

  return {
    get: (rule, key) => run('get', rule, key, { kind: 'get' }, {}) as Promise<KeyState>,
    reset: async (rule, key) => {
      await run('reset', rule, key, undefined, {});
    },
    block: async (rule, key, duration) => {
      const ms = parseDuration(duration, 'block.duration');
      return run('block', rule, key, { kind: 'block', ms }, { blockMs: ms }) as Promise<KeyState>;
    },
    unblock: (rule, key) => run('unblock', rule, key, { kind: 'unblock' }, {}) as Promise<KeyState>,
    penalize: async (rule, key, units) => {
      const n = positiveUnits(units, 'penalize.units');
      return run('penalize', rule, key, { kind: 'penalize', units: n }, { units: n }) as Promise<KeyState>;
    },
    reward: async (rule, key, units) => {
      const n = positiveUnits(units, 'reward.units');
      return run('reward', rule, key, { kind: 'reward', units: n }, { units: n }) as Promise<KeyState>;
    },
  };
}
