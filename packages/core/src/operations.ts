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
import { type CompiledRule, specFor } from './rules.js';
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

/**
 * The values in force for the key, for a rule whose `limit` or `burst` is a function of the
 * request: without a request tollgate cannot call it, so the operation is told (the
 * caller's plan, as the function would return it). Refused for a rule with plain values.
 * @example await limiter.get('user', 'u1', { limit: 5000 })
 */
export interface OperationValues {
  limit?: number;
  burst?: number;
}

/**
 * The last argument of an operation that changes a key: the values in force (as
 * {@link OperationValues}) and an operation id. With an `id`, the store applies the change
 * once per (rule, key, id) for a day: a call retried after `TG_STORE_UNCONFIRMED` with the
 * same id changes nothing more if the first was applied (docs/operations.md).
 * @example await limiter.penalize('api', 'tenant-42', 40, { id: 'incident-7' })
 */
export interface OperationOptions extends OperationValues {
  /** Up to 128 characters; any text (sanitised like a key). */
  id?: string;
}

/** Operations on one (rule, key) without a request. See docs/operations.md. */
export interface KeyOperations {
  /** The key's state for the rule: remaining, reset, retry and block. */
  get(rule: string, key: OperationKey, values?: OperationValues): Promise<KeyState>;
  /** Forgets the key's state for the rule (a fresh budget, no block). */
  reset(rule: string, key: OperationKey): Promise<void>;
  /**
   * Refuses the key (reason `'blocked'`, with `Retry-After`) for `duration`, as `blockFor`
   * does, on any rule; a block already ending later is kept.
   */
  block(rule: string, key: OperationKey, duration: Duration, options?: OperationOptions): Promise<KeyState>;
  /** Lifts a block (the counter is left as it is: `reset` forgets both). */
  unblock(rule: string, key: OperationKey, options?: OperationOptions): Promise<KeyState>;
  /** Consumes up to `units` of what the key has left now, never beyond empty. */
  penalize(rule: string, key: OperationKey, units: number, options?: OperationOptions): Promise<KeyState>;
  /** Gives back up to `units` of what the key has used, never beyond a full budget. */
  reward(rule: string, key: OperationKey, units: number, options?: OperationOptions): Promise<KeyState>;
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
  /** The operation id given, if any. */
  id?: string;
  /** The state after the operation (absent for `reset` and on failure). */
  state?: KeyState;
  /** Why it failed, when it did (the operation's promise rejects with it too). */
  error?: unknown;
}

/** What operations need of a limiter: its store and clock, and its rules by name. */
export interface OperationSource {
  readonly store: Store;
  readonly clock: Clock | undefined;
  /** The rule named `name` as it is now (after any update), or undefined. */
  ruleByName(name: string): Pick<CompiledRule<never>, 'spec' | 'dynamic'> | undefined;
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

/**
 * The spec an operation works with: the rule's own, or for a rule whose limit or burst is a
 * function of the request, the one derived from the values the caller gave (required: the
 * placeholder values of such a rule would misstate every figure and cap).
 */
function specOf(rule: Pick<CompiledRule<never>, 'spec' | 'dynamic'>, values: unknown, operation: string): RuleSpec {
  const path = `${operation}.values`;
  const d = rule.dynamic;
  if (values !== undefined && (typeof values !== 'object' || values === null)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'an object { limit?, burst? }',
      received: describe(values),
      fix: 'Pass { limit: 5000 }, or leave it out.',
    });
  }
  const v = (values ?? {}) as Record<string, unknown>;
  for (const name of Object.keys(v)) {
    if (name === 'id' && operation !== 'get') continue;
    const used = d !== undefined && (name === 'limit' ? d.limit : name === 'burst' ? d.burst : undefined) !== undefined;
    if (!used) {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.${name}`,
        expected:
          d === undefined ? 'no values: this rule has plain ones' : 'only the values that are functions of the request on this rule',
        received: describe(v[name]),
        fix: `Leave ${name} out: rule ${JSON.stringify(rule.spec.name)} ${d === undefined ? 'uses its own values (change them with update)' : `does not take ${name} per request`}.`,
      });
    }
  }
  if (d === undefined) return rule.spec;
  for (const name of ['limit', 'burst'] as const) {
    if (d[name] === undefined) continue;
    const x = v[name];
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x <= 0) {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.${name}`,
        expected: `the key's ${name} in force, as a positive whole number: rule ${JSON.stringify(rule.spec.name)}'s ${name} is a function of the request`,
        received: describe(x),
        fix: `Pass the value the rule's ${name} function returns for this key, e.g. { ${name}: 5000 } for the caller's plan.`,
      });
    }
  }
  return specFor(rule as CompiledRule<never>, v.limit, v.burst);
}

/** MAX characters of an operation id. */
const ID_MAX = 128;

/** The operation id of `values`, checked, or undefined. */
function idOf(values: unknown, operation: string): string | undefined {
  const id = (values as { id?: unknown } | undefined)?.id;
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || id.length === 0 || id.length > ID_MAX) {
    throw configError('TG_INVALID_OPTION', {
      path: `${operation}.values.id`,
      expected: `an operation id: a string of 1 to ${ID_MAX} characters`,
      received: describe(id),
      fix: "Pass an id that names this change, the same on every retry of it, e.g. { id: 'incident-7-charge' }.",
    });
  }
  return id;
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

  function ruleOf(name: unknown, operation: string): { rule: Pick<CompiledRule<never>, 'spec' | 'dynamic'>; source: OperationSource } {
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
    values?: unknown,
  ): Promise<KeyState | undefined> {
    const found = ruleOf(name, operation);
    const { source } = found;
    // A reset forgets the state whatever the values; every other operation reads or caps it.
    const rule = op === undefined ? found.rule.spec : specOf(found.rule, values, operation);
    const { store, clock } = source;
    const raw = keyText(rawKey, `${operation}.key`);
    const key = sanitizeKey(raw);
    const id = op === undefined || op.kind === 'get' ? undefined : idOf(values, operation);
    const message: KeyOpMessage = { operation, rule: rule.name, key: raw, ...extra };
    if (id !== undefined) message.id = id;
    // The id as stores hold it: bounded and plain, like a key.
    const storeOp = id === undefined || op === undefined ? op : ({ ...op, id: sanitizeKey(id) } as KeyOp);
    try {
      const now = clock?.now();
      let state: KeyState | undefined;
      if (storeOp === undefined) await store.reset(rule, key, raw);
      else {
        if (typeof store.keyOp !== 'function') throw unsupported(store, operation);
        state = stateOf(rule, raw, key, await store.keyOp(rule, key, storeOp as KeyOp, now, raw));
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
    get: (rule, key, values) => run('get', rule, key, { kind: 'get' }, {}, values) as Promise<KeyState>,
    reset: async (rule, key) => {
      await run('reset', rule, key, undefined, {});
    },
    block: async (rule, key, duration, values) => {
      const ms = parseDuration(duration, 'block.duration');
      return run('block', rule, key, { kind: 'block', ms }, { blockMs: ms }, values) as Promise<KeyState>;
    },
    unblock: (rule, key, values) => run('unblock', rule, key, { kind: 'unblock' }, {}, values) as Promise<KeyState>,
    penalize: async (rule, key, units, values) => {
      const n = positiveUnits(units, 'penalize.units');
      return run('penalize', rule, key, { kind: 'penalize', units: n }, { units: n }, values) as Promise<KeyState>;
    },
    reward: async (rule, key, units, values) => {
      const n = positiveUnits(units, 'reward.units');
      return run('reward', rule, key, { kind: 'reward', units: n }, { units: n }, values) as Promise<KeyState>;
    },
  };
}
