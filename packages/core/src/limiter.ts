/**
 * The stacking engine: `createLimiter({ rules, store, clock })`.
 *
 * Per request it resolves each rule's key and cost, drops rules whose key is
 * undefined/null, and hands the rest to the store as one all-or-nothing decision.
 */
import { createHash } from 'node:crypto';
import { callbackResultError, guardAppFn, markAppError } from './app-errors.js';
import type { Clock } from './clock.js';
import { channels, DURATION } from './diagnostics.js';
import { configError, describe } from './errors.js';
import { ip } from './keys.js';
import { DECIDE, MemoryStore } from './memory-store.js';
import { type KeyOperations, keyOperations, type OperationKey } from './operations.js';
import { createReservation, type Reservation, type ReservationEngine, settleUnsupported } from './reserve.js';
import {
  type CompiledRule,
  checkAcross,
  compileChanges,
  compileRules,
  type DynamicValues,
  type KeyFn,
  type Rule,
  type RuleChanges,
  specFor,
} from './rules.js';
import { didYouMean, unknownOptionFix } from './suggest.js';
import type { Decision, RuleResult, RuleSpec, Store, StoreDecision, StoreOp } from './types.js';

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

const RECEIPT = Symbol('tollgate.receipt');
/** The rule names of a decision already given back: a unit is refunded at most once. */
const REFUNDED = Symbol('tollgate.refunded');
type WithReceipt = Decision & { [RECEIPT]?: StoreOp[]; [REFUNDED]?: Set<string> };

/** What an admitted decision consumed, rule by rule (undefined for a refusal). */
export function decisionOps(decision: Decision): readonly StoreOp[] | undefined {
  return (decision as WithReceipt)[RECEIPT];
}

/** Each limiter's reservation engine, for the HTTP pipeline's settles (`settleDecision`). */
const engines = new WeakMap<object, ReservationEngine>();

/** The reservation engine of a limiter made by `createLimiter`. */
export function reservationEngine(lim: object): ReservationEngine | undefined {
  return engines.get(lim);
}

/**
 * The ops of an admitted decision not given back yet (only `names`' when given), marked as
 * given back: a rule's units go back at most once, whichever path asks first (a refusal's
 * refund, an uncounted status, a settle). A rule that did not admit (a dry-run refusal)
 * consumed nothing and is left out.
 */
export function claimOps(decision: Decision, names?: readonly string[]): StoreOp[] {
  const w = decision as WithReceipt;
  let ops = w[RECEIPT];
  if (!ops || !decision.allowed) return [];
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

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';
}

/** A key function's result as a key: strings and numbers; null and undefined skip the rule. */
function keyOf(k: unknown, name: string): string {
  if (typeof k === 'string') return k;
  if ((typeof k === 'number' && Number.isFinite(k)) || typeof k === 'bigint') return String(k);
  throw callbackResultError(
    `rules.${name}.key`,
    'a string, a number, undefined or null (or a promise of one)',
    k,
    'Return an id such as req.user?.id, not the object that holds it.',
  );
}

const KEY_MAX = 128;

/**
 * Printable ASCII except space, braces and a leading '#' (1 to KEY_MAX characters): kept
 * verbatim. Anything else is hashed, so a client-chosen string can neither grow without
 * bound nor steer a Redis Cluster slot. A loop rather than a regular expression: this runs
 * for every rule of every request.
 */
function plainKey(key: string): boolean {
  const n = key.length;
  if (n === 0 || n > KEY_MAX || key.charCodeAt(0) === 35) return false;
  for (let i = 0; i < n; i++) {
    const c = key.charCodeAt(i);
    // 0x21-0x7a, '|' (0x7c) and '~' (0x7e)
    if (c < 0x21 || (c > 0x7a && c !== 0x7c && c !== 0x7e)) return false;
  }
  return true;
}

/**
 * Recently hashed keys. A key that needs hashing is often a constant of the app's own
 * (`'GET /users'`, with its space) seen on every request, and SHA-256 costs far more than
 * the rest of a decision. Bounded: emptied when full, so client-chosen strings cannot grow it.
 */
const hashed = new Map<string, string>();
const HASHED_MAX = 4096;

/** Turns any key into a bounded store-safe string. Exported for stores and tests. */
export function sanitizeKey(key: string): string {
  return plainKey(key) ? key : hashedKey(key);
}

/**
 * The stored form `sanitizeKey` gives a key it does not keep verbatim: `#` and 32
 * base64url characters, a shape no plain key has (a plain key never starts with `#`).
 * Controls use it to keep a client's key off a name they reserve for themselves.
 */
export function hashedKey(key: string): string {
  let h = hashed.get(key);
  if (h === undefined) {
    // Hash the UTF-16 code units themselves: as UTF-8, every lone surrogate becomes U+FFFD,
    // so 'a\uD800' and 'a\uDC00' would share one counter.
    h = `#${createHash('sha256').update(key, 'utf16le').digest('base64url').slice(0, 32)}`;
    if (key.length <= KEY_MAX) {
      if (hashed.size >= HASHED_MAX) hashed.clear();
      hashed.set(key, h);
    }
  }
  return h;
}

function costOf(spec: RuleSpec, raw: unknown): number {
  if (typeof raw !== 'number') {
    throw callbackResultError(`rules.${spec.name}.cost`, 'a number (or a promise of one)', raw, "Return the request's cost as a number.");
  }
  // A cost that is not a finite non-negative number fails closed: the rule refuses it.
  if (!(raw >= 0) || raw === Number.POSITIVE_INFINITY) return spec.maxCost + 1;
  return Math.ceil(raw);
}

/** A rejected key or cost promise is the app's error, as a throw would be. */
function rethrowAsApp(err: unknown): never {
  throw markAppError(err);
}

const NONE: string[] = Object.freeze([]) as unknown as string[];

function finish(ops: StoreOp[], d: StoreDecision, startedAt: number): Decision {
  const decision = toResults(ops, d, ops);
  if (startedAt >= 0) (decision as Decision & { [DURATION]?: number })[DURATION] = performance.now() - startedAt;
  return decision;
}

/** When a decision starts, for its duration on `tollgate:decision`; -1 (no clock read) when nobody listens. */
function started(): number {
  return channels.decision.hasSubscribers ? performance.now() : -1;
}

/** The decision a store's answer makes; `receipt`: the ops an admission consumed (not for a peek). */
function toResults(ops: readonly StoreOp[], d: StoreDecision, receipt?: StoreOp[]): Decision {
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

/** One rule as a limiter holds it: replaced in place by `update`, shared by the limiters `extend` makes. */
interface Cell<R> {
  c: CompiledRule<R>;
  readonly key: KeyFn<R>;
  /** The rule's last key string and its sanitised form (see cachedKey). */
  lastRaw: string | undefined;
  lastKey: string;
}

/**
 * The rules of a limiter and of every limiter made from it (`extend`, and an adapter's
 * route stacks), by name: what `update` changes and operations by rule name look up.
 */
export interface RuleFamily<R> {
  readonly prefix: string;
  readonly byName: Map<string, Cell<R>[]>;
  /** Counts updates, so a view of the rules is rebuilt only after one. */
  version: number;
}

/** A family for limiters that should be updated together (an adapter's app and route stacks). */
export function ruleFamily<R>(prefix = 'tg'): RuleFamily<R> {
  return { prefix, byName: new Map(), version: 0 };
}

const families = new WeakMap<object, RuleFamily<unknown>>();

/**
 * The rule named `name` among a limiter's rules, its tiers' and those of the limiters
 * made from it, as it is now (after any `update`); `undefined` when there is none.
 */
export function ruleByName<R>(limiter: Limiter<R>, name: string): CompiledRule<R> | undefined {
  const family = families.get(limiter) as RuleFamily<R> | undefined;
  return family?.byName.get(name)?.[0]?.c;
}

/**
 * Replaces `changes` of every rule named `name` in `family`, validated as at construction,
 * all or none. The next decisions use the new values; the state is kept (same identity).
 */
export function updateRule<R>(family: RuleFamily<R>, name: string, changes: RuleChanges<R>): void {
  const cells = typeof name === 'string' ? family.byName.get(name) : undefined;
  if (cells === undefined) {
    const names = [...family.byName.keys()];
    throw configError('TG_UNKNOWN_RULE', {
      path: 'update',
      expected: `the name of one of this limiter's rules (${names.map((n) => JSON.stringify(n)).join(', ')})`,
      received: describe(name),
      fix: `${didYouMean(name, names)}Name a rule as it is declared (its \`name\`).`,
    });
  }
  const guarded: RuleChanges<R> = typeof changes === 'object' && changes !== null ? { ...changes } : changes;
  if (typeof guarded === 'object' && guarded !== null) {
    if (typeof guarded.limit === 'function') guarded.limit = guardAppFn(guarded.limit);
    if (typeof guarded.burst === 'function') guarded.burst = guardAppFn(guarded.burst);
    if (typeof guarded.cost === 'function') guarded.cost = guardAppFn(guarded.cost);
  }
  const next = cells.map((cell) => compileChanges(cell.c, guarded, family.prefix, 'update'));
  for (const [i, cell] of cells.entries()) cell.c = next[i] as CompiledRule<R>;
  family.version++;
}

function cellOf<R>(c: CompiledRule<R>, defaultKey: KeyFn<R>, family: RuleFamily<R>): Cell<R> {
  const cell: Cell<R> = { c, key: c.key ?? defaultKey, lastRaw: undefined, lastKey: '' };
  const list = family.byName.get(c.spec.name);
  if (list === undefined) family.byName.set(c.spec.name, [cell]);
  else list.push(cell);
  return cell;
}

/** A limiter's tiers: the function naming a request's tier, and each tier's rules. */
interface Tiering<R> {
  readonly fn: (req: R) => unknown;
  readonly stacks: ReadonlyMap<string, Cell<R>[]>;
}

const TIER_NAME = /^[\x21-\x7e]{1,64}$/;

/** Validates `tiers` and `tier` (both or neither) and compiles every tier's rules. */
function compileTiers<R>(tiers: unknown, tier: unknown, prefix: string): Map<string, CompiledRule<R>[]> | undefined {
  if (tiers === undefined && tier === undefined) return undefined;
  if (tiers === undefined || typeof tiers !== 'object' || tiers === null || Array.isArray(tiers) || Object.keys(tiers).length === 0) {
    throw configError('TG_INVALID_OPTION', {
      path: 'tiers',
      expected: 'an object of named rule stacks, e.g. { free: [...], pro: [...] }, beside tier',
      received: tiers === undefined ? 'tier without tiers' : describe(tiers),
      fix: "Pass tiers: { free: [{ name: 'free', rate: '100/min' }], pro: [{ name: 'pro', rate: '5000/min' }] } and tier: (req) => req.user?.plan ?? 'free'.",
    });
  }
  if (typeof tier !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: 'tier',
      expected: 'a function (req) => the name of a tier (or a promise of one)',
      received: tier === undefined ? 'tiers without tier' : describe(tier),
      fix: "Pass tier: (req) => req.user?.plan ?? 'free'.",
    });
  }
  const out = new Map<string, CompiledRule<R>[]>();
  for (const [name, stack] of Object.entries(tiers as Record<string, unknown>)) {
    if (!TIER_NAME.test(name)) {
      throw configError('TG_INVALID_OPTION', {
        path: 'tiers',
        expected: 'tier names of 1 to 64 visible ASCII characters',
        received: JSON.stringify(name),
        fix: 'Name each tier after its plan, e.g. "free" or "pro".',
      });
    }
    // An empty tier adds no rule of its own (the base rules still apply).
    const path = `tiers.${name}`;
    out.set(name, Array.isArray(stack) && stack.length === 0 ? [] : compileRules(stack as readonly Rule<R>[], prefix, path));
  }
  return out;
}

function tierStack<R>(tiering: Tiering<R>, v: unknown): Cell<R>[] {
  if (typeof v === 'string') {
    const cells = tiering.stacks.get(v);
    if (cells !== undefined) return cells;
  }
  throw callbackResultError(
    'tier',
    `the name of a tier: ${[...tiering.stacks.keys()].map((n) => JSON.stringify(n)).join(', ')} (or a promise of one)`,
    v,
    "Return one of the tier names; map an unknown or missing plan to one of them, e.g. req.user?.plan ?? 'free'.",
  );
}

/** A rule's key string, sanitised; the same string as last time costs one comparison. */
function cachedKey<R>(cell: Cell<R>, raw: string): string {
  if (raw === cell.lastRaw) return cell.lastKey;
  const key = sanitizeKey(raw);
  cell.lastRaw = raw;
  cell.lastKey = key;
  return key;
}

/** One rule's op from its key (already a plain value) and cost; a promise when a value is async. */
function opOf<R>(cell: Cell<R>, k: unknown, req: R, override: number | undefined): StoreOp | Promise<StoreOp> {
  const rule = cell.c;
  const raw = keyOf(k, rule.spec.name);
  return opFor(rule, cachedKey(cell, raw), raw, req, override);
}

const noop = () => {};

/** A rule's op from its sanitised key and its cost (a promise when the cost or a value is async). */
function opFor<R>(rule: CompiledRule<R>, key: string, raw: string, req: R, override: number | undefined): StoreOp | Promise<StoreOp> {
  if (rule.dynamic !== undefined) return dynamicOp(rule, rule.dynamic, key, raw, req, override);
  const spec = rule.spec;
  const c = override ?? rule.cost ?? (rule.costFn as (req: R) => unknown)(req);
  if (isThenable(c)) return Promise.resolve(c).then((v) => ({ rule: spec, key, raw, cost: costOf(spec, v) }), rethrowAsApp);
  return { rule: spec, key, raw, cost: costOf(spec, c) };
}

/** The op of a rule whose limit or burst is a function: its values, then the spec derived from them. */
function dynamicOp<R>(
  rule: CompiledRule<R>,
  d: DynamicValues<R>,
  key: string,
  raw: string,
  req: R,
  override: number | undefined,
): StoreOp | Promise<StoreOp> {
  const l: unknown = d.limit === undefined ? undefined : d.limit(req);
  let b: unknown;
  let c: unknown;
  try {
    b = d.burst === undefined ? undefined : d.burst(req);
    c = override ?? rule.cost ?? (rule.costFn as (req: R) => unknown)(req);
  } catch (err) {
    if (isThenable(l)) Promise.resolve(l).then(noop, noop);
    if (isThenable(b)) Promise.resolve(b).then(noop, noop);
    throw err;
  }
  if (isThenable(l) || isThenable(b) || isThenable(c)) {
    return Promise.all([l, b, c]).then(([lv, bv, cv]) => {
      const spec = specFor(rule, lv, bv);
      return { rule: spec, key, raw, cost: costOf(spec, cv) };
    }, rethrowAsApp);
  }
  const spec = specFor(rule, l, b);
  return { rule: spec, key, raw, cost: costOf(spec, c) };
}

/** One rule's op, or undefined when its key is absent; a promise when a function is async. */
function ruleOp<R>(cell: Cell<R>, req: R, cost: number | undefined): StoreOp | undefined | Promise<StoreOp | undefined> {
  const k: unknown = cell.key(req);
  if (k === undefined || k === null) return undefined;
  if (isThenable(k)) {
    return Promise.resolve(k).then((v) => (v === undefined || v === null ? undefined : opOf(cell, v, req, cost)), rethrowAsApp);
  }
  return opOf(cell, k, req, cost);
}

/** The ops of a stack of cells, in order; a promise when a function is async. */
function opsOf<R>(cells: readonly Cell<R>[], req: R, cost: number | undefined): StoreOp[] | Promise<StoreOp[]> {
  const n = cells.length;
  if (n === 1) {
    // One rule, the common case: an array of exactly one op, not a growable empty one.
    const op = ruleOp(cells[0] as Cell<R>, req, cost);
    if (op === undefined) return [];
    if (op instanceof Promise) return op.then((o) => (o === undefined ? [] : [o]));
    return [op];
  }
  const ops: StoreOp[] = [];
  for (let i = 0; i < n; i++) {
    const op = ruleOp(cells[i] as Cell<R>, req, cost);
    if (op instanceof Promise) return restOf(cells, i, ops, op, req, cost);
    if (op !== undefined) ops.push(op);
  }
  return ops;
}

/** `opsOf` from the first rule whose op is a promise (`first`, rule `i`) on. */
function restOf<R>(
  cells: readonly Cell<R>[],
  i: number,
  ops: StoreOp[],
  first: Promise<StoreOp | undefined>,
  req: R,
  cost: number | undefined,
): Promise<StoreOp[]> {
  const pending: Array<StoreOp | undefined | Promise<StoreOp | undefined>> = [...ops, first];
  for (let j = i + 1; j < cells.length; j++) {
    try {
      pending.push(ruleOp(cells[j] as Cell<R>, req, cost));
    } catch (err) {
      // The promises already made are dropped: keep their rejections handled.
      Promise.all(pending).then(noop, noop);
      throw err;
    }
  }
  return Promise.all(pending).then((all) => all.filter((o): o is StoreOp => o !== undefined));
}

/** The base ops followed by those of the request's tier. */
function withTier<R>(
  base: StoreOp[] | Promise<StoreOp[]>,
  tiering: Tiering<R>,
  req: R,
  cost: number | undefined,
): StoreOp[] | Promise<StoreOp[]> {
  let tops: StoreOp[] | Promise<StoreOp[]>;
  try {
    const t: unknown = tiering.fn(req);
    tops = isThenable(t)
      ? Promise.resolve(t).then((v) => opsOf(tierStack(tiering, v), req, cost), rethrowAsApp)
      : opsOf(tierStack(tiering, t), req, cost);
  } catch (err) {
    if (base instanceof Promise) base.then(noop, noop);
    throw err;
  }
  if (base instanceof Promise || tops instanceof Promise) {
    return Promise.all([base, tops]).then(([a, b]) => (a.length === 0 ? b : a.concat(b)));
  }
  return base.length === 0 ? tops : base.concat(tops);
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

function build<R>(
  cells: Cell<R>[],
  tiering: Tiering<R> | undefined,
  store: Store,
  clock: Clock | undefined,
  prefix: string,
  defaultKey: KeyFn<R>,
  family: RuleFamily<R>,
): Limiter<R> {
  // The base rules' ops, as closures over this limiter's own arrays (the hot path: the same
  // shape as a limiter without tiers or values per request had; tiers use opsOf).
  const n = cells.length;
  const keyFns = cells.map((c) => c.key);
  // Each rule's last key string and its sanitised form; and, once that key has come twice
  // in a row, the op made for it when the rule's cost is a plain number (no per-call
  // override, no function-valued limit). Ops are never changed once made, so the next
  // request with the same key and rule gets the same object: a rule with a constant key
  // ('global', a route) or a client's run of requests allocates no op. A key that changes
  // every time (many clients) costs what it did: a new key only clears the op, with no new
  // object stored into these long-lived arrays (which V8 pays a write barrier for).
  const lastRaw: (string | undefined)[] = new Array(n).fill(undefined);
  const lastKey: string[] = new Array(n).fill('');
  const lastOp: (StoreOp | undefined)[] = new Array(n).fill(undefined);
  /** The rule `lastOp` was made for (an update makes a new rule, so a new op). */
  const lastRule: (CompiledRule<R> | undefined)[] = new Array(n).fill(undefined);

  function baseOpOf(i: number, k: unknown, req: R, override: number | undefined): StoreOp | Promise<StoreOp> {
    const rule = (cells[i] as Cell<R>).c;
    const raw = keyOf(k, rule.spec.name);
    if (raw === lastRaw[i]) {
      const last = lastOp[i];
      if (last !== undefined && override === undefined && lastRule[i] === rule) return last;
      return repeatedOp(i, rule, raw, req, override);
    }
    const key = sanitizeKey(raw);
    lastRaw[i] = raw;
    lastKey[i] = key;
    lastOp[i] = undefined;
    // opFor, written out: this is every request's path when the key changes each time.
    if (rule.dynamic !== undefined) return dynamicOp(rule, rule.dynamic, key, raw, req, override);
    const spec = rule.spec;
    const c = override ?? rule.cost ?? (rule.costFn as (req: R) => unknown)(req);
    if (isThenable(c)) return Promise.resolve(c).then((v) => ({ rule: spec, key, raw, cost: costOf(spec, v) }), rethrowAsApp);
    return { rule: spec, key, raw, cost: costOf(spec, c) };
  }

  /** The op of a key seen last time too, kept for the next time when its cost is a plain number. */
  function repeatedOp(i: number, rule: CompiledRule<R>, raw: string, req: R, override: number | undefined): StoreOp | Promise<StoreOp> {
    const op = opFor(rule, lastKey[i] as string, raw, req, override);
    if (override === undefined && rule.cost !== undefined && rule.dynamic === undefined) {
      lastOp[i] = op as StoreOp;
      lastRule[i] = rule;
    }
    return op;
  }

  function baseOp(i: number, req: R, cost: number | undefined): StoreOp | undefined | Promise<StoreOp | undefined> {
    return baseOpWith(i, (keyFns[i] as KeyFn<R>)(req), req, cost);
  }

  /** The op of base rule `i` for the key its key function returned (`k`). */
  function baseOpWith(i: number, k: unknown, req: R, cost: number | undefined): StoreOp | undefined | Promise<StoreOp | undefined> {
    if (k === undefined || k === null) return undefined;
    if (isThenable(k)) {
      return Promise.resolve(k).then((v) => (v === undefined || v === null ? undefined : baseOpOf(i, v, req, cost)), rethrowAsApp);
    }
    return baseOpOf(i, k, req, cost);
  }

  /**
   * The base rules' ops. `from` and `head`: the ops of the rules before `from` are known
   * already (`head`, absent keys left out), so those rules' key functions are not called again.
   */
  function baseOps(req: R, cost: number | undefined, from = 0, head?: readonly StoreOp[]): StoreOp[] | Promise<StoreOp[]> {
    if (n === 1) {
      // One rule, the common case: an array of exactly one op, not a growable empty one.
      const op = baseOp(0, req, cost);
      if (op === undefined) return [];
      if (op instanceof Promise) return op.then((o) => (o === undefined ? [] : [o]));
      return [op];
    }
    // Sized once (a growing array reallocated its store on the way), trimmed if a rule's key was absent.
    const ops: StoreOp[] = new Array(n);
    let j = 0;
    if (head !== undefined) for (; j < head.length; j++) ops[j] = head[j] as StoreOp;
    for (let i = from; i < n; i++) {
      const op = baseOp(i, req, cost);
      if (op instanceof Promise) {
        // From the first promise on, the rest keep every rejection handled (see restOf).
        return restOf(cells, i, ops.slice(0, j), op, req, cost);
      }
      if (op !== undefined) ops[j++] = op;
    }
    // A rule whose key was absent: a copy of the filled part. Setting `length` to shrink
    // the array is a runtime call in V8 (about 420 instructions, more than the copy).
    return j === n ? ops : ops.slice(0, j);
  }

  // The ops array of the last decision whose rules all had their kept op, given again to the
  // next decision whose rules all have them: a client's run of requests on a stack with
  // constant keys makes no array. Only for a MemoryStore's own decisions (decideOps below),
  // which neither keep nor change the array; the decision's receipt is read-only.
  // `resolve`, peeks and other stores get arrays of their own, as before.
  //
  // While the array is kept, a rule whose key function returns the raw key of its op there
  // has that op (its rule has not been updated since: `keptAt`; no cost passed for the
  // call), so that is all a kept rule costs: its key function and one comparison.
  let keptOps: StoreOp[] | undefined;
  let keptAt = -1;
  function sharedOps(req: R, cost: number | undefined): StoreOp[] | Promise<StoreOp[]> {
    const kept = keptOps;
    if (kept === undefined || cost !== undefined || keptAt !== family.version) {
      const ops = baseOps(req, cost);
      // The first rule's op, checked first: with a new client every time it is not kept.
      if (!(ops instanceof Promise) && ops[0] === lastOp[0] && allKept(ops)) {
        keptOps = ops;
        keptAt = family.version;
      }
      return ops;
    }
    for (let i = 0; i < n; i++) {
      const k: unknown = (keyFns[i] as KeyFn<R>)(req);
      if (k !== (kept[i] as StoreOp).raw) return leaveKept(kept, i, baseOpWith(i, k, req, cost), req, cost);
    }
    return kept;
  }

  /** Whether `ops` are every base rule's kept op. */
  function allKept(ops: readonly StoreOp[]): boolean {
    if (ops.length !== n) return false;
    for (let i = 0; i < n; i++) if (ops[i] !== lastOp[i]) return false;
    return true;
  }

  /**
   * Another key (or rule) at `i` than in the shared array: the rest as usual, and the plain
   * path until the ops are all kept ones again (many clients in turn pay no comparisons).
   */
  function leaveKept(
    kept: readonly StoreOp[],
    i: number,
    op: StoreOp | undefined | Promise<StoreOp | undefined>,
    req: R,
    cost: number | undefined,
  ): StoreOp[] | Promise<StoreOp[]> {
    keptOps = undefined;
    const head = kept.slice(0, i);
    if (op instanceof Promise) return restOf(cells, i, head, op, req, cost);
    if (op !== undefined) head.push(op);
    return baseOps(req, cost, i + 1, head);
  }

  function resolveAsync(req: R, cost?: number): StoreOp[] | Promise<StoreOp[]> {
    const base = baseOps(req, cost);
    return tiering === undefined ? base : withTier(base, tiering, req, cost);
  }

  function resolve(req: R, cost?: number): StoreOp[] {
    const ops = resolveAsync(req, cost);
    if (ops instanceof Promise) {
      ops.catch(() => {});
      throw callbackResultError(
        'rules',
        'key, cost, limit, burst and tier functions that return plain values here',
        ops,
        'Use consume, decide or resolveAsync.',
      );
    }
    return ops;
  }

  const now = clock ? () => clock.now() : () => undefined;
  // A MemoryStore (one whose consumeSync is its own) decides into objects it reuses, which
  // finish reads at once.
  const inPlace = store instanceof MemoryStore && store.consumeSync === MemoryStore.prototype.consumeSync;
  const consumeSync = inPlace ? store[DECIDE] : store.consumeSync;
  // In-process stores decide synchronously: no promise per decision. A store that can
  // sometimes (a RedisStore from its leases) is asked first, and answers or passes.
  const consumeLocal = consumeSync === undefined ? store.consumeLocal : undefined;
  const decideOps =
    consumeSync !== undefined
      ? (ops: StoreOp[], t0: number) => finish(ops, consumeSync.call(store, ops, now()), t0)
      : consumeLocal !== undefined
        ? (ops: StoreOp[], t0: number): Decision | Promise<Decision> => {
            const t = now();
            const d = consumeLocal.call(store, ops, t);
            if (d !== undefined) return finish(ops, d, t0);
            return store.consume(ops, t).then((x) => finish(ops, x, t0));
          }
        : (ops: StoreOp[], t0: number) => store.consume(ops, now()).then((d) => finish(ops, d, t0));

  // What `rules` and `tiers` show, rebuilt after an update.
  let seen = -1;
  let rulesView: CompiledRule<R>[] = [];
  let tiersView: Record<string, CompiledRule<R>[]> | undefined;
  function views(): void {
    if (seen === family.version) return;
    seen = family.version;
    rulesView = cells.map((c) => c.c);
    tiersView =
      tiering === undefined ? undefined : Object.fromEntries([...tiering.stacks].map(([name, stack]) => [name, stack.map((c) => c.c)]));
  }

  // Operations by key look a rule up among this limiter's rules and its tiers', as they are
  // now (after any update).
  const own = (name: string): CompiledRule<R> | undefined => {
    for (const c of cells) if (c.c.spec.name === name) return c.c;
    for (const stack of tiering?.stacks.values() ?? []) for (const c of stack) if (c.c.spec.name === name) return c.c;
    return undefined;
  };
  const ops = keyOperations({
    store,
    clock,
    ruleByName: (name) => own(name) as CompiledRule<never> | undefined,
    ruleNames: () => [...cells, ...[...(tiering?.stacks.values() ?? [])].flat()].map((c) => c.c.spec.name),
  });

  const engine: ReservationEngine = {
    store,
    now,
    opsOf: (d) => decisionOps(d) ?? [],
    claim: (d, names) => claimOps(d, names),
    unclaim: unclaimOnInvalidTime,
  };

  // A MemoryStore deciding in place may be given the shared ops array (see sharedOps); one
  // rule keeps its own path (an array of one op costs less than the checks).
  const shared = inPlace && tiering === undefined && n > 1;
  function decide(req: R, o: { cost?: number } | undefined): Decision | Promise<Decision> {
    const t0 = started();
    const cost = o?.cost;
    const ops = shared ? sharedOps(req, cost) : resolveAsync(req, cost);
    if (ops instanceof Promise) return ops.then((x) => decideOps(x, t0));
    return decideOps(ops, t0);
  }

  // `rules` and `tiers` are accessors defined after the literal, the same two functions for
  // every limiter: a literal with a getter starts in dictionary mode in V8, and so does an
  // object given an accessor another object of its shape has with another function; every
  // `limiter.consume` then pays a hash lookup.
  const limiter: Omit<Limiter<R>, 'rules' | 'tiers'> & Viewed = {
    [VIEW]: (which) => {
      views();
      return which === 'rules' ? rulesView : tiersView;
    },
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
      return finish(ops, consumeSync.call(store, ops, now()), t0);
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
        await store.refund(ops, decision.at, now());
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

function extendRules<R>(
  cells: readonly Cell<R>[],
  tiering: Tiering<R> | undefined,
  rules: readonly Rule<R>[],
  prefix: string,
): CompiledRule<R>[] {
  const added = compileRules(rules, prefix, 'route rules');
  const names = new Set(cells.map((c) => c.c.spec.name));
  const tierOf = new Map<string, string>();
  for (const [tier, stack] of tiering?.stacks ?? []) for (const c of stack) tierOf.set(c.c.spec.name, tier);
  for (const [i, c] of added.entries()) {
    const tier = tierOf.get(c.spec.name);
    if (names.has(c.spec.name) || tier !== undefined) {
      throw configError('TG_DUPLICATE_RULE', {
        path: `route rules[${i}].name`,
        expected: `route rule names that differ from the app-level rule names${tier === undefined ? '' : ' and those of its tiers'}`,
        received:
          tier === undefined ? JSON.stringify(c.spec.name) : `${JSON.stringify(c.spec.name)}, a rule of tier ${JSON.stringify(tier)}`,
        fix: 'Rename the route rule; it adds to the app-level stack rather than replacing it.',
      });
    }
  }
  return added;
}
