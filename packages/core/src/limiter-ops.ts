/**
 * From a request to the ops a store decides: each rule's key (sanitised) and cost, the
 * values of rules whose limit is a function of the request, and the request's tier.
 */
import { createHash } from 'node:crypto';
import { callbackResultError, markAppError } from './app-errors.js';
import { type CompiledRule, type DynamicValues, type KeyFn, specFor } from './rules.js';
import type { RuleSpec, StoreOp } from './types.js';

export function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';
}

/** A key function's result as a key: strings and numbers; null and undefined skip the rule. */
export function keyOf(k: unknown, name: string): string {
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

export function costOf(spec: RuleSpec, raw: unknown): number {
  if (typeof raw !== 'number') {
    throw callbackResultError(`rules.${spec.name}.cost`, 'a number (or a promise of one)', raw, "Return the request's cost as a number.");
  }
  // A cost that is not a finite non-negative number fails closed: the rule refuses it.
  if (!(raw >= 0) || raw === Number.POSITIVE_INFINITY) return spec.maxCost + 1;
  return Math.ceil(raw);
}

/** A rejected key or cost promise is the app's error, as a throw would be. */
export function rethrowAsApp(err: unknown): never {
  throw markAppError(err);
}

/** One rule as a limiter holds it: replaced in place by `update`, shared by the limiters `extend` makes. */
export interface Cell<R> {
  c: CompiledRule<R>;
  readonly key: KeyFn<R>;
  /** The rule's last key string and its sanitised form (see cachedKey). */
  lastRaw: string | undefined;
  lastKey: string;
  /**
   * The op made for `lastRaw` when its cost is a plain number (no per-call cost, no value
   * per request): ops are never changed, so the same key again gets the same object.
   */
  lastOp: StoreOp | undefined;
}

/** A limiter's tiers: the function naming a request's tier, and each tier's rules. */
export interface Tiering<R> {
  readonly fn: (req: R) => unknown;
  readonly stacks: ReadonlyMap<string, Cell<R>[]>;
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
export function cachedKey<R>(cell: Cell<R>, raw: string): string {
  if (raw === cell.lastRaw) return cell.lastKey;
  const key = sanitizeKey(raw);
  cell.lastRaw = raw;
  cell.lastKey = key;
  return key;
}

/** One rule's op from its key (already a plain value) and cost; a promise when a value is async. */
export function opOf<R>(cell: Cell<R>, k: unknown, req: R, override: number | undefined): StoreOp | Promise<StoreOp> {
  const rule = cell.c;
  const raw = keyOf(k, rule.spec.name);
  if (raw !== cell.lastRaw) {
    cell.lastOp = undefined;
    return opFor(rule, cachedKey(cell, raw), raw, req, override);
  }
  const last = cell.lastOp;
  // An update compiles a new spec: the kept op is for the rule as it was.
  if (last !== undefined && override === undefined && last.rule === rule.spec) return last;
  const op = opFor(rule, cell.lastKey, raw, req, override);
  if (override === undefined && rule.cost !== undefined && rule.dynamic === undefined) cell.lastOp = op as StoreOp;
  return op;
}

export const noop = () => {};

/** A rule's op from its sanitised key and its cost (a promise when the cost or a value is async). */
export function opFor<R>(
  rule: CompiledRule<R>,
  key: string,
  raw: string,
  req: R,
  override: number | undefined,
): StoreOp | Promise<StoreOp> {
  if (rule.dynamic !== undefined) return dynamicOp(rule, rule.dynamic, key, raw, req, override);
  const spec = rule.spec;
  const c = override ?? rule.cost ?? (rule.costFn as (req: R) => unknown)(req);
  if (isThenable(c)) return Promise.resolve(c).then((v) => ({ rule: spec, key, raw, cost: costOf(spec, v) }), rethrowAsApp);
  return { rule: spec, key, raw, cost: costOf(spec, c) };
}

/** The op of a rule whose limit or burst is a function: its values, then the spec derived from them. */
export function dynamicOp<R>(
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
export function ruleOp<R>(cell: Cell<R>, req: R, cost: number | undefined): StoreOp | undefined | Promise<StoreOp | undefined> {
  const k: unknown = cell.key(req);
  if (k === undefined || k === null) return undefined;
  if (isThenable(k)) {
    return Promise.resolve(k).then((v) => (v === undefined || v === null ? undefined : opOf(cell, v, req, cost)), rethrowAsApp);
  }
  return opOf(cell, k, req, cost);
}

/** The ops of a stack of cells, in order; a promise when a function is async. */
export function opsOf<R>(cells: readonly Cell<R>[], req: R, cost: number | undefined): StoreOp[] | Promise<StoreOp[]> {
  const n = cells.length;
  if (n === 1) {
    // One rule, the common case: an array of exactly one op, not a growable empty one.
    const op = ruleOp(cells[0] as Cell<R>, req, cost);
    if (op === undefined) return [];
    if (op instanceof Promise) return op.then((o) => (o === undefined ? [] : [o]));
    return [op];
  }
  // Sized once (a growing array reallocates its store on the way), copied when a key was
  // absent (setting `length` to shrink it is a runtime call in V8, dearer than the copy).
  const ops: StoreOp[] = new Array(n);
  let j = 0;
  for (let i = 0; i < n; i++) {
    const op = ruleOp(cells[i] as Cell<R>, req, cost);
    if (op instanceof Promise) return restOf(cells, i, ops.slice(0, j), op, req, cost);
    if (op !== undefined) ops[j++] = op;
  }
  return j === n ? ops : ops.slice(0, j);
}

/** `opsOf` from the first rule whose op is a promise (`first`, rule `i`) on. */
export function restOf<R>(
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
export function withTier<R>(
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

/**
 * A stack's `resolve` and `resolveAsync`: the ops a request maps to (base rules, then its
 * tier's). `resolve` throws `TG_INVALID_CALLBACK_RESULT` where a function returned a promise.
 */
export function resolver<R>(
  cells: readonly Cell<R>[],
  tiering: Tiering<R> | undefined,
): { resolve(req: R, cost?: number): StoreOp[]; resolveAsync(req: R, cost?: number): StoreOp[] | Promise<StoreOp[]> } {
  function resolveAsync(req: R, cost?: number): StoreOp[] | Promise<StoreOp[]> {
    const base = opsOf(cells, req, cost);
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
  return { resolve, resolveAsync };
}
