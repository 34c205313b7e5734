/**
 * The stacking engine: `createLimiter({ rules, store, clock })`.
 *
 * Per request it resolves each rule's key and cost, drops rules whose key is
 * undefined/null, and hands the rest to the store as one all-or-nothing decision.
 */
import { createHash } from 'node:crypto';
import { callbackResultError, markAppError } from './app-errors.js';
import type { Clock } from './clock.js';
import { channels, DURATION } from './diagnostics.js';
import { configError, describe } from './errors.js';
import { ip } from './keys.js';
import { DECIDE, MemoryStore } from './memory-store.js';
import { type CompiledRule, compileRules, type KeyFn, type Rule } from './rules.js';
import { unknownOptionFix } from './suggest.js';
import type { Decision, RuleResult, Store, StoreDecision, StoreOp } from './types.js';

export interface LimiterOptions<R> {
  /** The stack: every rule must admit a request for it to pass. */
  rules: readonly Rule<R>[];
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
export interface Limiter<R> {
  readonly rules: readonly CompiledRule<R>[];
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
  /** Forgets the request's keys for every rule. */
  reset(req: R): Promise<void>;
  /** A limiter deciding this stack plus `rules` as one stack (same store, clock, prefix). */
  extend(rules: readonly Rule<R>[]): Limiter<R>;
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
  if (plainKey(key)) return key;
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

function costOf<R>(rule: CompiledRule<R>, raw: unknown): number {
  if (typeof raw !== 'number') {
    throw callbackResultError(
      `rules.${rule.spec.name}.cost`,
      'a number (or a promise of one)',
      raw,
      "Return the request's cost as a number.",
    );
  }
  // A cost that is not a finite non-negative number fails closed: the rule refuses it.
  if (!(raw >= 0) || raw === Number.POSITIVE_INFINITY) return rule.spec.maxCost + 1;
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
  if (typeof options !== 'object' || options === null) {
    throw configError('TG_INVALID_OPTION', {
      path: 'createLimiter',
      expected: 'an options object { rules, store?, clock? }',
      received: describe(options),
      fix: 'Pass { rules: [...] }.',
    });
  }
  const { rules, store, clock, prefix = 'tg', defaultKey, ...rest } = options;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw configError('TG_UNKNOWN_OPTION', {
      path: `createLimiter.${unknown}`,
      expected: 'rules, store, clock, prefix or defaultKey',
      received: JSON.stringify(unknown),
      fix: unknownOptionFix(unknown, ['rules', 'store', 'clock', 'prefix', 'defaultKey']),
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
  return build(
    compileRules(rules, prefix),
    store ?? new MemoryStore(clock ? { clock } : {}),
    clock,
    prefix,
    (defaultKey ?? ip()) as KeyFn<R>,
  );
}

function build<R>(compiled: CompiledRule<R>[], store: Store, clock: Clock | undefined, prefix: string, defaultKey: KeyFn<R>): Limiter<R> {
  const n = compiled.length;
  const keyFns = compiled.map((c) => c.key ?? defaultKey);
  // Each rule's last key string and its sanitised form: a key is mostly the same string
  // request after request (a tenant, a route, a constant), and sanitising it again (a
  // scan, or a hash lookup for 'GET /') is most of what a rule's key costs.
  const lastRaw: (string | undefined)[] = new Array(n).fill(undefined);
  const lastKey: string[] = new Array(n).fill('');
  function cachedKey(i: number, raw: string): string {
    if (raw === lastRaw[i]) return lastKey[i] as string;
    const key = sanitizeKey(raw);
    lastRaw[i] = raw;
    lastKey[i] = key;
    return key;
  }

  /** One rule's op from its key (already a plain value) and cost; a promise when the cost is async. */
  function opOf(i: number, k: unknown, req: R, override: number | undefined): StoreOp | Promise<StoreOp> {
    const rule = compiled[i] as CompiledRule<R>;
    const raw = keyOf(k, rule.spec.name);
    const key = cachedKey(i, raw);
    const c = override ?? rule.cost ?? (rule.costFn as (req: R) => unknown)(req);
    if (isThenable(c)) return Promise.resolve(c).then((v) => ({ rule: rule.spec, key, raw, cost: costOf(rule, v) }), rethrowAsApp);
    return { rule: rule.spec, key, raw, cost: costOf(rule, c) };
  }

  /** One rule's op, or undefined when its key is absent; a promise when a function is async. */
  function ruleOp(i: number, req: R, cost: number | undefined): StoreOp | undefined | Promise<StoreOp | undefined> {
    const k: unknown = (keyFns[i] as KeyFn<R>)(req);
    if (k === undefined || k === null) return undefined;
    if (isThenable(k)) {
      return Promise.resolve(k).then((v) => (v === undefined || v === null ? undefined : opOf(i, v, req, cost)), rethrowAsApp);
    }
    return opOf(i, k, req, cost);
  }

  function resolveAsync(req: R, cost?: number): StoreOp[] | Promise<StoreOp[]> {
    if (n === 1) {
      // One rule, the common case: an array of exactly one op, not a growable empty one.
      const op = ruleOp(0, req, cost);
      if (op === undefined) return [];
      if (op instanceof Promise) return op.then((o) => (o === undefined ? [] : [o]));
      return [op];
    }
    const ops: StoreOp[] = [];
    let pending: Array<StoreOp | undefined | Promise<StoreOp | undefined>> | undefined;
    for (let i = 0; i < n; i++) {
      const op = ruleOp(i, req, cost);
      if (pending !== undefined) pending.push(op);
      else if (op instanceof Promise) pending = [...ops, op];
      else if (op !== undefined) ops.push(op);
    }
    if (pending === undefined) return ops;
    return Promise.all(pending).then((all) => all.filter((o): o is StoreOp => o !== undefined));
  }

  function resolve(req: R, cost?: number): StoreOp[] {
    const ops = resolveAsync(req, cost);
    if (ops instanceof Promise) {
      ops.catch(() => {});
      throw callbackResultError(
        'rules',
        'key and cost functions that return plain values here',
        ops,
        'Use consume, decide or resolveAsync.',
      );
    }
    return ops;
  }

  const now = clock ? () => clock.now() : () => undefined;
  // A MemoryStore (one whose consumeSync is its own) decides into objects it reuses, which
  // finish reads at once.
  const consumeSync =
    store instanceof MemoryStore && store.consumeSync === MemoryStore.prototype.consumeSync ? store[DECIDE] : store.consumeSync;
  // In-process stores decide synchronously: no promise per decision.
  const decideOps =
    consumeSync !== undefined
      ? (ops: StoreOp[], t0: number) => finish(ops, consumeSync.call(store, ops, now()), t0)
      : (ops: StoreOp[], t0: number) => store.consume(ops, now()).then((d) => finish(ops, d, t0));

  const limiter: Limiter<R> = {
    rules: compiled,
    store,
    clock,
    prefix,
    resolve,
    resolveAsync,
    consume(req, o) {
      try {
        const d = limiter.decide(req, o);
        return d instanceof Promise ? d : Promise.resolve(d);
      } catch (err) {
        return Promise.reject(err);
      }
    },
    decide(req, o) {
      const t0 = started();
      const ops = resolveAsync(req, o?.cost);
      if (ops instanceof Promise) return ops.then((x) => decideOps(x, t0));
      return decideOps(ops, t0);
    },
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
      let ops = (decision as WithReceipt)[RECEIPT];
      if (!ops || !decision.allowed) return;
      if (o?.rules) {
        const names = new Set(o.rules);
        ops = ops.filter((op) => names.has(op.rule.name));
      }
      // A rule that did not admit (dry-run refusal) consumed nothing: nothing to give back.
      const admitted = new Set(decision.rules.filter((r) => r.allowed).map((r) => r.name));
      // Each rule at most once: a refusal's refund and an uncounted status's refund of the
      // same decision must not give the unit back twice.
      const w = decision as WithReceipt;
      const done = w[REFUNDED] ?? new Set<string>();
      ops = ops.filter((op) => admitted.has(op.rule.name) && !done.has(op.rule.name));
      if (ops.length === 0) return;
      for (const op of ops) done.add(op.rule.name);
      w[REFUNDED] = done;
      try {
        await store.refund(ops, decision.at, now());
      } catch (err) {
        // A store that refused the call before doing anything (a clock that gave no time)
        // gave nothing back: the units may still be given back later. Any other failure
        // (a timeout, say) may have reached the store, so the refund stays spent.
        if ((err as { code?: unknown } | null)?.code === 'TG_INVALID_TIME') for (const op of ops) done.delete(op.rule.name);
        throw err;
      }
    },
    async reset(req) {
      await Promise.all((await resolveAsync(req)).map((op) => store.reset(op.rule, op.key, op.raw)));
    },
    extend(rules) {
      return build([...compiled, ...extendRules(compiled, rules, prefix)], store, clock, prefix, defaultKey);
    },
  };
  return limiter;
}

function extendRules<R>(existing: CompiledRule<R>[], rules: readonly Rule<R>[], prefix: string): CompiledRule<R>[] {
  const added = compileRules(rules, prefix, 'route rules');
  const names = new Set(existing.map((c) => c.spec.name));
  for (const [i, c] of added.entries()) {
    if (names.has(c.spec.name)) {
      throw configError('TG_DUPLICATE_RULE', {
        path: `route rules[${i}].name`,
        expected: 'route rule names that differ from the app-level rule names',
        received: JSON.stringify(c.spec.name),
        fix: 'Rename the route rule; it adds to the app-level stack rather than replacing it.',
      });
    }
  }
  return added;
}
