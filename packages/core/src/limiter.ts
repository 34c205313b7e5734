/**
 * The stacking engine: `createLimiter({ rules, store, clock })`.
 *
 * Per request it resolves each rule's key and cost, drops rules whose key is
 * undefined/null, and hands the rest to the store as one all-or-nothing decision.
 */
import type { Clock } from './clock.js';
import { claimOps, decisionOps, engines, finish, started, toResults, unclaimOnInvalidTime } from './decision.js';
import { configError, describe } from './errors.js';
import { ip } from './keys.js';
import { type Cell, resolver, type Tiering } from './limiter-ops.js';
import { MemoryStore } from './memory-store.js';
import { type KeyOperations, keyOperations, type OperationKey } from './operations.js';
import { createReservation, type Reservation, type ReservationEngine, settleUnsupported } from './reserve.js';
import {
  cellOf,
  compileTiers,
  everyCell,
  extendRules,
  families,
  ownRule,
  type RuleFamily,
  ruleFamily,
  ruleViews,
  updateRule,
} from './rule-family.js';
import { type CompiledRule, checkAcross, compileRules, type KeyFn, type Rule, type RuleChanges } from './rules.js';
import { unknownOptionFix } from './suggest.js';
import type { Decision, RuleSpec, StackPlan, Store, StoreDecision, StoreOp } from './types.js';

export { claimOps, decisionOps, reservationEngine, unclaimOnInvalidTime } from './decision.js';
export { hashedKey, sanitizeKey } from './limiter-ops.js';
export { type RuleFamily, ruleByName, ruleFamily, updateRule } from './rule-family.js';

export interface LimiterOptions<R> {
  /**
   * The stack: every rule must admit a request for it to pass. May be empty (or left out)
   * when `tiers` gives every request its rules.
   */
  rules?: readonly Rule<R>[];
  /**
   * Named rule stacks, one of which joins `rules` per request (picked by `tier`): all
   * validated here, decided with the base rules as one all-or-nothing decision. A rule
   * name is unique across `rules` and every tier; give two tiers' rules one `group` to
   * share a budget (a customer moving from one plan to the other keeps what was used).
   * @example tiers: { free: [{ name: 'free', rate: '100/min' }], pro: [{ name: 'pro', rate: '5000/min' }] }
   */
  tiers?: Readonly<Record<string, readonly Rule<R>[]>>;
  /**
   * The tier of a request (with `tiers`): its name, or a promise of it. A name that is not
   * a tier (or not a string) is a `TG_INVALID_CALLBACK_RESULT` error, never an admission.
   * @example tier: (req) => req.user?.plan ?? 'free'
   */
  tier?: (req: R) => string | Promise<string>;
  /** @default new MemoryStore() */
  store?: Store;
  /** Time source; when omitted the store's own clock decides (Redis: `TIME`). */
  clock?: Clock;
  /** Namespace of every store key. @default 'tg' */
  prefix?: string;
  /** Key used by rules that name none. @default ip() */
  defaultKey?: KeyFn<R>;
}

/**
 * A stack of rules bound to a store, made by {@link createLimiter}. The adapters hold one;
 * use it directly for anything that is not an HTTP request (jobs, sockets, queues).
 * @example
 * const limiter = createLimiter({ rules: [{ name: 'job', key: (job: Job) => job.tenant, rate: '10/s' }] });
 * const d = await limiter.consume(job);
 * if (!d.allowed) setTimeout(retry, d.retryAfterMs);
 */
export interface Limiter<R> extends Omit<KeyOperations, 'reset'> {
  /** The base rules (and those `extend` added), as they are now. */
  readonly rules: readonly CompiledRule<R>[];
  /** Each tier's rules, by tier name; `undefined` without tiers. */
  readonly tiers: Readonly<Record<string, readonly CompiledRule<R>[]>> | undefined;
  readonly store: Store;
  readonly clock: Clock | undefined;
  readonly prefix: string;
  /** Decides the request and consumes from every rule if all admit. */
  consume(req: R, options?: { cost?: number }): Promise<Decision>;
  /**
   * The same decision as `consume`, made synchronously when the store can
   * (`Store.consumeSync`, e.g. MemoryStore), so an adapter can answer in the same tick;
   * `undefined` when the store decides asynchronously (call `consume`). Throws what
   * `consume` would reject with.
   */
  consumeSync(req: R, options?: { cost?: number }): Decision | undefined;
  /**
   * The same decision as `consume`, synchronously when every key and cost function
   * returns a plain value and the store decides in-process, otherwise as a promise (an
   * async key or cost is awaited). What adapters call: one evaluation of each function.
   */
  decide(req: R, options?: { cost?: number }): Decision | Promise<Decision>;
  /** Decides without consuming. */
  peek(req: R, options?: { cost?: number }): Promise<Decision>;
  /**
   * Gives back what `decision` consumed (no-op for a rejected decision). A rule's units
   * are given back at most once per decision, whichever path asks first.
   */
  refund(req: R, decision: Decision, options?: { rules?: readonly string[] }): Promise<void>;
  /**
   * Reserves `cost` (an estimate) for work whose cost is known only afterwards: decided
   * exactly as `consume` (a stack all or nothing). Settle the reservation with the actual
   * cost (`settle`), or `cancel` it; one never settled stays charged at its estimate.
   * @throws TG_STORE_UNSUPPORTED (as a rejection) when the store cannot settle.
   * @example
   * const r = await limiter.reserve(req, { cost: 500 });
   * if (r.allowed) await r.settle(tokensUsed);
   */
  reserve(req: R, options?: { cost?: number }): Promise<Reservation>;
  /** Forgets the request's keys for every rule. */
  reset(req: R): Promise<void>;
  /**
   * Forgets one key's state for the rule named `rule` (an operation by key, see `get`):
   * told from `reset(req)` by its two arguments.
   */
  reset(rule: string, key: OperationKey): Promise<void>;
  /** A limiter deciding this stack plus `rules` as one stack (same store, clock, prefix, tiers). */
  extend(rules: readonly Rule<R>[]): Limiter<R>;
  /**
   * Replaces a rule's `limit`, `burst`, `cost` or `blockFor` in place, validated as at
   * construction (all or nothing); the next decisions use it, and its state is kept. Covers
   * the base rules, the tiers' and those of the limiters `extend` made from this one (every
   * rule of that name). Per process: apply the same update on every instance.
   * @throws TG_UNKNOWN_RULE for a name no rule has; TG_UNKNOWN_OPTION for another field.
   * @example limiter.update('pro', { limit: 10_000 });
   */
  update(ruleName: string, changes: RuleChanges<R>): void;
  /**
   * The ops this request maps to (for adapters and diagnostics). Throws
   * `TG_INVALID_CALLBACK_RESULT` when a key or cost function returns a promise (use
   * `resolveAsync`).
   */
  resolve(req: R, cost?: number): StoreOp[];
  /** The ops this request maps to, awaiting async key and cost functions. */
  resolveAsync(req: R, cost?: number): StoreOp[] | Promise<StoreOp[]>;
}

/**
 * Creates a limiter for a stack of rules.
 * @example
 * const limiter = createLimiter({ rules: [{ name: 'ip', rate: '100/min' }] });
 * const decision = await limiter.consume(req);
 */
export function createLimiter<R = unknown>(options: LimiterOptions<R>): Limiter<R> {
  return createLimiterIn(options, undefined);
}

/**
 * `createLimiter` in a given rule family (adapters: the app-level and route stacks of one
 * limiter are updated together); a new family when `family` is undefined.
 */
export function createLimiterIn<R>(options: LimiterOptions<R>, family: RuleFamily<R> | undefined): Limiter<R> {
  if (typeof options !== 'object' || options === null) {
    throw configError('TG_INVALID_OPTION', {
      path: 'createLimiter',
      expected: 'an options object { rules, store?, clock? }',
      received: describe(options),
      fix: 'Pass { rules: [...] }.',
    });
  }
  const { rules, tiers, tier, store, clock, prefix = 'tg', defaultKey, ...rest } = options;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw configError('TG_UNKNOWN_OPTION', {
      path: `createLimiter.${unknown}`,
      expected: 'rules, tiers, tier, store, clock, prefix or defaultKey',
      received: JSON.stringify(unknown),
      fix: unknownOptionFix(unknown, ['rules', 'tiers', 'tier', 'store', 'clock', 'prefix', 'defaultKey']),
    });
  }
  if (typeof prefix !== 'string' || !/^[\x21-\x7a|~]{1,32}$/.test(prefix)) {
    throw configError('TG_INVALID_OPTION', {
      path: 'prefix',
      expected: '1 to 32 visible ASCII characters without braces',
      received: describe(prefix),
      fix: 'Use a short prefix such as "tg" or "myapp".',
    });
  }
  if (clock !== undefined && typeof clock?.now !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: 'clock',
      expected: 'an object with now(): number',
      received: describe(clock),
      fix: 'Pass a Clock such as new ManualClock().',
    });
  }
  if (store !== undefined && (typeof store !== 'object' || typeof (store as Store).consume !== 'function')) {
    throw configError('TG_INVALID_OPTION', {
      path: 'store',
      expected: 'a Store (MemoryStore, RedisStore, ...)',
      received: describe(store),
      fix: 'Pass new MemoryStore() or a RedisStore.',
    });
  }
  if (defaultKey !== undefined && typeof defaultKey !== 'function') {
    throw configError('TG_INVALID_KEY', {
      path: 'defaultKey',
      expected: 'a function (req) => string | undefined',
      received: describe(defaultKey),
      fix: 'Pass ip({ trustProxy }) or another key function.',
    });
  }
  const tierRules = compileTiers<R>(tiers, tier, prefix);
  // With tiers, the base stack may be empty: every request gets its tier's rules.
  const base =
    tierRules !== undefined && (rules === undefined || (Array.isArray(rules) && rules.length === 0))
      ? []
      : compileRules(rules as readonly Rule<R>[], prefix);
  if (tierRules !== undefined) {
    checkAcross([{ path: 'rules', compiled: base }, ...[...tierRules].map(([name, compiled]) => ({ path: `tiers.${name}`, compiled }))]);
  }
  const fam = family ?? ruleFamily<R>(prefix);
  const key = (defaultKey ?? ip()) as KeyFn<R>;
  const cells = base.map((c) => cellOf(c, key, fam));
  const tiering: Tiering<R> | undefined =
    tierRules === undefined
      ? undefined
      : {
          fn: tier as (req: R) => unknown,
          stacks: new Map([...tierRules].map(([name, stack]) => [name, stack.map((c) => cellOf(c, key, fam))])),
        };
  return build(cells, tiering, store ?? new MemoryStore(clock ? { clock } : {}), clock, prefix, key, fam);
}

/** A limiter's current `rules` or `tiers` (rebuilt after an update), behind the shared accessors. */
const VIEW = Symbol('tollgate.view');
interface Viewed {
  [VIEW](which: 'rules' | 'tiers'): unknown;
}
const VIEW_ACCESSORS: PropertyDescriptorMap = {
  rules: {
    enumerable: true,
    get(this: Viewed) {
      return this[VIEW]('rules');
    },
  },
  tiers: {
    enumerable: true,
    get(this: Viewed) {
      return this[VIEW]('tiers');
    },
  },
};

/**
 * How a limiter reaches its store: through a plan when the store prepares one (prepared at
 * the first decision, and again after an update changed the rules), else `consumeSync`
 * when the store has it, else `consume` (a promise).
 */
function decider(
  store: Store,
  specs: () => RuleSpec[],
  family: RuleFamily<unknown>,
): ((ops: StoreOp[], now: number | undefined) => StoreDecision) | undefined {
  if (typeof store.prepare === 'function') {
    let plan: StackPlan | undefined;
    let at = -1;
    return (ops, now) => {
      if (at !== family.version || plan === undefined) {
        plan = (store.prepare as NonNullable<Store['prepare']>)(specs());
        at = family.version;
      }
      return plan.consume(ops, now);
    };
  }
  const sync = store.consumeSync;
  return sync === undefined ? undefined : (ops, now) => sync.call(store, ops, now);
}

/**
 * A stack's decision as the limiter makes it: synchronously through the plan or
 * `consumeSync` (in-process stores: no promise per decision); a store that can sometimes (a
 * RedisStore from its leases) is asked first and answers or passes; else `consume`.
 */
function deciding(
  store: Store,
  consumeSync: ((ops: StoreOp[], now: number | undefined) => StoreDecision) | undefined,
  now: () => number | undefined,
): (ops: StoreOp[], t0: number) => Decision | Promise<Decision> {
  if (consumeSync !== undefined) return (ops, t0) => finish(ops, consumeSync(ops, now()), t0);
  const consumeLocal = store.consumeLocal;
  if (consumeLocal === undefined) return (ops, t0) => store.consume(ops, now()).then((d) => finish(ops, d, t0));
  return (ops, t0) => {
    const t = now();
    const d = consumeLocal.call(store, ops, t);
    if (d !== undefined) return finish(ops, d, t0);
    return store.consume(ops, t).then((x) => finish(ops, x, t0));
  };
}

function build<R>(
  cells: Cell<R>[],
  tiering: Tiering<R> | undefined,
  store: Store,
  clock: Clock | undefined,
  prefix: string,
  defaultKey: KeyFn<R>,
  family: RuleFamily<R>,
): Limiter<R> {
  const { resolve, resolveAsync } = resolver(cells, tiering);
  const now = clock ? () => clock.now() : () => undefined;
  // Every rule a request may bring, in the order its ops come: the base rules, then each tier's.
  const specs = (): RuleSpec[] => everyCell(cells, tiering).map((c) => c.c.spec);
  const consumeSync = decider(store, specs, family as RuleFamily<unknown>);
  const decideOps = deciding(store, consumeSync, now);

  function decide(req: R, o: { cost?: number } | undefined): Decision | Promise<Decision> {
    const t0 = started();
    const ops = resolveAsync(req, o?.cost);
    if (ops instanceof Promise) return ops.then((x) => decideOps(x, t0));
    return decideOps(ops, t0);
  }

  const ops = keyOperations({
    store,
    clock,
    ruleByName: (name) => ownRule(cells, tiering, name) as CompiledRule<never> | undefined,
    ruleNames: () => everyCell(cells, tiering).map((c) => c.c.spec.name),
  });
  const view = ruleViews(cells, tiering, family);

  const engine: ReservationEngine = {
    store,
    now,
    opsOf: (d) => decisionOps(d) ?? [],
    claim: (d, names) => claimOps(d, names),
    unclaim: unclaimOnInvalidTime,
  };

  // `rules` and `tiers` are accessors defined after the literal, the same two functions for
  // every limiter: a literal with a getter starts in dictionary mode in V8, and so does an
  // object given an accessor another object of its shape has with another function; every
  // `limiter.consume` then pays a hash lookup.
  const limiter: Omit<Limiter<R>, 'rules' | 'tiers'> & Viewed = {
    [VIEW]: view,
    store,
    clock,
    prefix,
    ...ops,
    resolve,
    resolveAsync,
    consume(req, o) {
      try {
        const d = decide(req, o);
        if (d instanceof Promise) return d;
        // A field read first gives TurboFan the decision's map, which has no `then`, so the
        // resolution skips the generic lookup of `then` along the prototype chain (about 180
        // instructions whenever the decision was made in a function not inlined here).
        void d.at;
        return Promise.resolve(d);
      } catch (err) {
        return Promise.reject(err);
      }
    },
    decide,
    consumeSync(req, o) {
      if (consumeSync === undefined) return undefined;
      const t0 = started();
      const ops = resolve(req, o?.cost);
      return finish(ops, consumeSync(ops, now()), t0);
    },
    peek(req, o) {
      // Without an await when the keys and costs are plain values: a peek asked in the same
      // tick as decisions reaches the store in the order it was asked (a batching store
      // decides a tick's calls in order).
      const read = (ops: StoreOp[]) => store.peek(ops, now()).then((d) => toResults(ops, d));
      try {
        const ops = resolveAsync(req, o?.cost);
        return ops instanceof Promise ? ops.then(read) : read(ops);
      } catch (err) {
        return Promise.reject(err);
      }
    },
    async refund(_req, decision, o) {
      const ops = claimOps(decision, o?.rules);
      if (ops.length === 0) return;
      try {
        await store.refund(ops, decision.at, now(), decision.degraded === 'local' ? 'local' : undefined);
      } catch (err) {
        unclaimOnInvalidTime(decision, ops, err);
        throw err;
      }
    },
    reserve(req, o) {
      if (typeof store.settle !== 'function') return Promise.reject(settleUnsupported(store));
      return limiter.consume(req, o).then((d) => createReservation(d, engine));
    },
    async reset(...args: [R] | [string, OperationKey]) {
      // Two arguments: a rule name and a key (an operation by key); one: a request.
      if (args.length >= 2) return ops.reset(args[0] as string, args[1] as OperationKey);
      const req = args[0] as R;
      await Promise.all((await resolveAsync(req)).map((op) => store.reset(op.rule, op.key, op.raw)));
    },
    extend(rules) {
      const added = extendRules(cells, tiering, rules, prefix).map((c) => cellOf(c, defaultKey, family));
      return build([...cells, ...added], tiering, store, clock, prefix, defaultKey, family);
    },
    update(ruleName, changes) {
      updateRule(family, ruleName, changes);
    },
  };
  const full = Object.defineProperties(limiter, VIEW_ACCESSORS) as unknown as Limiter<R>;
  families.set(full, family as RuleFamily<unknown>);
  engines.set(full, engine);
  return full;
}
