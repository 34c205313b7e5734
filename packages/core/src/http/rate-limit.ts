/**
 * The request pipeline of a limiter, written once for every framework:
 * skip → keys and costs → one store decision → merge with the decisions the request met
 * before → headers → diagnostics → counting by outcome → pass, hold or refuse, and the
 * store-error policy when the store fails. Adapters reach it through their
 * {@link HttpPort} and mount what {@link createRateLimit} returns.
 *
 * Everything is built once per limiter (or per route stack); a request only calls
 * functions that already exist, and with an in-process store and synchronous
 * callbacks it is answered in the tick it arrived in.
 */

import { guardAppFn, guardRules, isAppError } from '../app-errors.js';
import type { Clock } from '../clock.js';
import { systemTimers } from '../controls/timers.js';
import { countedRules, refundUncountedOnFinish } from '../count-if.js';
import { publishDecision, publishStoreError } from '../diagnostics.js';
import { configError } from '../errors.js';
import { appendHeaderValue, type HeaderContext } from '../headers.js';
import type { HttpOptions, HttpOptionsInput } from '../http-options.js';
import { createLimiterIn, decisionOps, type Limiter, type LimiterOptions, ruleByName, ruleFamily, updateRule } from '../limiter.js';
import { MemoryStore } from '../memory-store.js';
import { mergeDecisions } from '../merge.js';
import { nextAdmission } from '../next-admission.js';
import { type KeyOperations, keyOperations, type OperationSource } from '../operations.js';
import { isCapacityRefusal, refusal, storeFailureRefusal } from '../response.js';
import type { CompiledRule, KeyFn, Rule, RuleChanges } from '../rules.js';
import type { Decision, RuleResult, RuleSpec, Store } from '../types.js';
import { type Access, deniedRefusal } from './access.js';
import { asAny, asMessageBody, asSkip, call, isThenable, settle } from './callbacks.js';
import { holdRequest } from './lifetime.js';
import { dropHeld, type HttpPort, localsOf as localsOn, readerMark, refusedAfterHead, sendRefusal, writeRefusalHead } from './port.js';
import { exposeSettle, reservations } from './settle.js';
import { proxyWarnings } from './warnings.js';

/** How a route's rules combine with the app-level (plugin-level) ones. */
export type RouteMode = 'add' | 'replace';

/** A limiter's options as the adapter normalised them (`normalizeHttpOptions` and its own). */
export interface RateLimitSource<Req, O extends HttpOptionsInput = HttpOptionsInput> extends HttpOptions<Req, O> {
  /** The adapter's root in error paths (`'rateLimit'`, `'tollgate'`). */
  path: string;
  /** Whether the app-level stack may be empty (Fastify: only routes with rules are limited). */
  allowEmpty: boolean;
  rules: readonly Rule<Req>[];
  tiers: Readonly<Record<string, readonly Rule<Req>[]>> | undefined;
  tier: ((req: Req) => string | Promise<string>) | undefined;
  store: Store | undefined;
  clock: Clock | undefined;
  prefix: string | undefined;
  /** The compiled `allow` and `deny` lists, when the limiter has either. */
  access?: Access<Req> | undefined;
}

/** How the adapter mounts the pipeline. */
export interface RateLimitSetup<Req, Res, Next> {
  /**
   * False when the adapter never calls `route()` (Fastify builds each route's whole stack
   * instead): the app-level decision and a skip are then not marked on the request for
   * route stages to read, which saves a property added to every request.
   */
  routeStages?: boolean;
  /** The `handler` option in the pipeline's signature, when the adapter's differs. */
  handler?: ((req: Req, res: Res, next: Next, decision: Decision) => unknown) | undefined;
}

/** The callbacks of a limiter in the pipeline's own (port-neutral) signatures. */
interface Callbacks<Req, Res, Next> {
  skip: ((req: Req, res: Res) => unknown) | undefined;
  message: ((req: Req, decision: Decision) => unknown) | undefined;
  handler: ((req: Req, res: Res, next: Next, decision: Decision) => unknown) | undefined;
  onRejected: ((req: Req, res: Res, decision: Decision) => unknown) | undefined;
  onStoreError: 'allow' | 'deny' | 'error' | ((err: unknown, req: Req, res: Res, next: Next) => unknown);
}

/** One stack's decision as a request handler in the framework's continuation style. */
export type Decide<Req, Res, Next> = (req: Req, res: Res, next: Next) => void;

export interface RateLimitCore<Req, Res, Next> {
  /** The app-level limiter (undefined for an empty stack). */
  readonly limiter: Limiter<Req> | undefined;
  /** Whether `handle` does anything: app-level rules, or allow and deny lists. */
  readonly active: boolean;
  /** The store every stack of this limiter shares. */
  readonly store: Store;
  /** The app-level middleware: skip → decide. */
  readonly handle: Decide<Req, Res, Next>;
  /** The decision handler of a stack built from this limiter (skip included). */
  stack(lim: Limiter<Req>): Decide<Req, Res, Next>;
  /** A route stack: the app-level rules plus `rules` (`'add'`), or `rules` alone (`'replace'`). */
  routeLimiter(rules: readonly Rule<Req>[], mode: RouteMode, path: string): Limiter<Req>;
  /**
   * A route-level middleware for frameworks whose app-level middleware runs first
   * (Express, node): decides only the route's rules when the app-level decision is on
   * the request, and gives that decision back when the route refuses (`'add'`), or in
   * every case (`'replace'`), so the whole is one all-or-nothing decision.
   */
  route(rules: readonly Rule<Req>[], mode: RouteMode, path: string): Decide<Req, Res, Next>;
  /**
   * `limiter.update` over every stack of this limiter: the app-level rules, the tiers and
   * every route's rules (each rule of that name).
   */
  update(ruleName: string, changes: RuleChanges<Req>): void;
  /**
   * The operations by key over every rule of this limiter: the app-level rules, the tiers'
   * and the route rules of every route stack built so far.
   */
  readonly operations: KeyOperations;
  /** Where `operations` look rules up (for an adapter that combines registrations). */
  readonly operationSource: OperationSource;
  /** Closes the store if this limiter created it. */
  close(): Promise<void>;
}

type WithDecision = Record<symbol, Decision | null | undefined>;
type NextMs = readonly (number | undefined)[] | undefined;
type Port<Req, Res, Next> = HttpPort<Req, Res, Next>;

const noop = () => {};

/** The store's own deadline, when it has one (RedisStore's `timeoutMs`). */
function storeDeadline(store: Store): number | undefined {
  const t = (store as { timeoutMs?: unknown }).timeoutMs;
  return typeof t === 'number' && t > 0 ? t : undefined;
}

/** Decision `all` with the rules of `refunded` as they are after its refund. */
function afterRefund(all: Decision, refunded: Decision): Decision {
  const ops = decisionOps(refunded);
  if (ops === undefined) return all;
  const rules = all.rules.map((r): RuleResult => {
    if (!refunded.rules.includes(r) || !r.allowed) return r;
    const op = ops.find((o) => o.rule.name === r.name);
    return op === undefined ? r : { ...r, remaining: Math.min(r.limit, r.remaining + op.cost) };
  });
  return { ...all, rules };
}

/**
 * Builds the limiter and its pipeline for one adapter instance.
 * @example const core = createRateLimit(expressPort, normalised); app.use((req, res, next) => core.handle(req, res, next));
 */
export function createRateLimit<Req, Res, Next>(
  port: Port<Req, Res, Next>,
  o: RateLimitSource<Req>,
  setup: RateLimitSetup<Req, Res, Next> = {},
): RateLimitCore<Req, Res, Next> {
  const s = { ...setup, ...callbacks<Req, Res, Next>(o, setup) };
  const ownStore = o.store === undefined ? new MemoryStore(o.clock ? { clock: o.clock } : {}) : undefined;
  const store = o.store ?? (ownStore as MemoryStore);
  const common = {
    store,
    ...(o.clock !== undefined ? { clock: o.clock } : {}),
    ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
    defaultKey: guardAppFn(o.defaultKey) as KeyFn<Req>,
  };
  const family = ruleFamily<Req>(o.prefix ?? 'tg');
  const tiered = o.tiers !== undefined || o.tier !== undefined;
  // With tiers, `rules` may be left out: each request gets its tier's rules.
  const rules = guardRules(o.rules === undefined && tiered ? [] : o.rules, 'rules');
  // Passed on as given (guarded when they are what they should be): the limiter reports the rest.
  const tiering = (
    tiered ? { tiers: guardTiers<Req>(o.tiers), tier: typeof o.tier === 'function' ? guardAppFn(o.tier) : o.tier } : {}
  ) as Pick<LimiterOptions<Req>, 'tiers' | 'tier'>;
  const limiter =
    Array.isArray(rules) && rules.length === 0 && o.allowEmpty && !tiered
      ? undefined
      : createLimiterIn<Req>({ rules, ...tiering, ...common }, family);
  const operationSource = ruleRegistry<Req>(store, o.clock);
  if (limiter !== undefined) operationSource.learn(limiter);
  const slot = Symbol(`tollgate:${o.name}`);
  // Whether route stages may read `slot` (see RateLimitSetup.routeStages).
  const marking = s.routeStages !== false;
  const localsOf = localsOn(port);
  const checkSkip = asSkip(`${o.path}.skip`);
  const skip = s.skip;

  /** skip → `go`; a skipped request is marked on `slot` so route stages skip it too. */
  function skipThen(req: Req, res: Res, next: Next, go: () => void): void {
    let result: unknown;
    try {
      result = call(skip as NonNullable<typeof skip>, req, res);
    } catch (err) {
      port.fail(next, err);
      return;
    }
    settle(
      result,
      checkSkip,
      (skipped) => {
        if (!skipped) return go();
        if (marking) (req as WithDecision)[slot] = null;
        port.pass(next);
      },
      (err) => port.fail(next, err),
    );
  }

  const warnings = o.trusted ? undefined : proxyWarnings({ adapter: port.name, trusted: false });
  const pipelines = new WeakMap<Limiter<Req>, Pipeline<Req, Res, Next>>();
  function pipelineOf(lim: Limiter<Req>): Pipeline<Req, Res, Next> {
    let p = pipelines.get(lim);
    if (p === undefined) {
      p = pipeline(port, lim, o, s, marking && lim === limiter ? slot : undefined, limiter, warnings);
      pipelines.set(lim, p);
    }
    return p;
  }

  const access = o.access;
  /**
   * The allow and deny lists → `go`. A denied request is answered 403 (a dry run lets it
   * on to the rules); an allowed one is marked on `slot`, like a skipped one.
   */
  function accessThen(req: Req, res: Res, next: Next, go: () => void): void {
    (access as Access<Req>)(
      req,
      (verdict) => {
        if (verdict === undefined || (verdict === 'deny' && o.dryRun)) return go();
        if (verdict === 'deny') return sendRefusal(port, res, deniedRefusal());
        if (marking) (req as WithDecision)[slot] = null;
        port.pass(next);
      },
      (err) => port.fail(next, err),
    );
  }

  function stack(lim: Limiter<Req>): Decide<Req, Res, Next> {
    const p = pipelineOf(lim);
    // Called with three arguments: no prior decision, headers appended.
    if (skip === undefined && access === undefined) return p as Decide<Req, Res, Next>;
    const skipped: Decide<Req, Res, Next> =
      skip === undefined
        ? (p as Decide<Req, Res, Next>)
        : (req, res, next) => skipThen(req, res, next, () => p(req, res, next, undefined, false));
    if (access === undefined) return skipped;
    return (req, res, next) => accessThen(req, res, next, () => skipped(req, res, next));
  }

  function routeLimiter(routeRules: readonly Rule<Req>[], mode: RouteMode, path: string): Limiter<Req> {
    const guarded = guardRules(routeRules, path);
    const lim =
      mode === 'add' && limiter !== undefined ? limiter.extend(guarded) : createLimiterIn<Req>({ rules: guarded, ...common }, family);
    operationSource.learn(lim);
    return lim;
  }

  // An empty stack still applies the lists (a Fastify registration with only route rules).
  const handle: Decide<Req, Res, Next> =
    limiter !== undefined
      ? stack(limiter)
      : access !== undefined
        ? (req, res, next) => accessThen(req, res, next, () => port.pass(next))
        : (_req, _res, next) => port.pass(next);
  const mark = readerMark(port);
  /** `decide` for a port whose requests are not Node-shaped: the key functions read them through the port. */
  const reading = (decide: Decide<Req, Res, Next>): Decide<Req, Res, Next> =>
    mark === undefined
      ? decide
      : (req, res, next) => {
          mark(req);
          decide(req, res, next);
        };

  return {
    limiter,
    active: limiter !== undefined || access !== undefined,
    store,
    handle: reading(handle),
    stack: (lim) => reading(stack(lim)),
    routeLimiter,
    route(routeRules, mode, path) {
      // An adapter bug, never a user's: its setup said it has no route stages.
      if (!marking) throw new Error(`${o.path}: route stages are off for this adapter (routeStages: false)`);
      const guarded = guardRules(routeRules, path);
      // Validates the route rules against the app-level ones (no shared names) for 'add'.
      const whole = routeLimiter(guarded, mode, path);
      const alone = mode === 'replace' ? whole : createLimiterIn<Req>({ rules: guarded, ...common }, family);
      const decideWhole = stack(whole);
      const decideAlone = pipelineOf(alone);
      return reading(function routeStage(req, res, next) {
        const prior = (req as WithDecision)[slot];
        if (prior === null) {
          // The app-level stage skipped this request: so does its route stage.
          port.pass(next);
          return;
        }
        if (prior === undefined) {
          decideWhole(req, res, next);
          return;
        }
        if (mode === 'add') {
          decideAlone(req, res, next, prior, false);
          return;
        }
        // 'replace' after the app-level stage: its units go back, the route's rules decide alone.
        (req as WithDecision)[slot] = undefined;
        const locals = localsOf(req);
        const fresh = locals.rateLimit === prior;
        if (fresh) locals.rateLimit = undefined;
        limiter?.refund(req, prior).then(
          () => decideAlone(req, res, next, undefined, fresh),
          (err) => {
            publishStoreError(err, req, o.name, 'allow');
            decideAlone(req, res, next, undefined, fresh);
          },
        );
      });
    },
    update: (ruleName, changes) => updateRule(family, ruleName, changes),
    operations: keyOperations(operationSource),
    operationSource,
    close: () => (ownStore === undefined ? Promise.resolve() : ownStore.close()),
  };
}

/** Every tier's rules with their functions guarded (see guardRules); other values as they are, for the limiter to report. */
function guardTiers<Req>(tiers: unknown): Readonly<Record<string, readonly Rule<Req>[]>> | undefined {
  if (typeof tiers !== 'object' || tiers === null || Array.isArray(tiers)) return tiers as undefined;
  return Object.fromEntries(Object.entries(tiers).map(([name, stack]) => [name, guardRules(stack as Rule<Req>[], `tiers.${name}`)]));
}

/**
 * The rules of a limiter's stacks by name, for operations by key: the app-level rules and
 * each route stack's as it is built. Two route rules of one name that count differently
 * (another algorithm or window, so another state) make the name ambiguous: an operation
 * on it is refused rather than guessing which state was meant.
 */
function ruleRegistry<Req>(store: Store, clock: Clock | undefined): OperationSource & { learn(lim: Limiter<Req>): void } {
  // Each name's first rule and a limiter that holds it: the spec is read from the limiter at
  // each operation, so an operation sees the rule as it is after an update (the identity,
  // which decides ambiguity, never changes).
  const byName = new Map<string, { spec: RuleSpec; rule: CompiledRule<Req>; lim: Limiter<Req> }>();
  const ambiguous = new Set<string>();
  return {
    store,
    clock,
    learn(lim) {
      for (const c of [...lim.rules, ...Object.values(lim.tiers ?? {}).flat()]) {
        const known = byName.get(c.spec.name);
        if (known === undefined) byName.set(c.spec.name, { spec: c.spec, rule: c, lim });
        else if (known.spec.id !== c.spec.id) ambiguous.add(c.spec.name);
      }
    },
    ruleByName(name) {
      if (ambiguous.has(name)) {
        throw configError('TG_UNKNOWN_RULE', {
          path: 'rule',
          expected: 'a rule name that names one state',
          received: `${JSON.stringify(name)}, the name of route rules with different algorithms or windows`,
          fix: 'Give those route rules different names to operate on their keys.',
        });
      }
      const known = byName.get(name);
      return known === undefined ? undefined : ((ruleByName(known.lim, name) ?? known.rule) as CompiledRule<never>);
    },
    ruleNames: () => byName.keys(),
  };
}

/** `(req, res, next, prior?, fresh?)`: `prior` is given back on a refusal; `fresh` replaces earlier headers. */
type Pipeline<Req, Res, Next> = (req: Req, res: Res, next: Next, prior?: Decision, fresh?: boolean) => void;

function callbacks<Req, Res, Next>(o: RateLimitSource<Req>, setup: RateLimitSetup<Req, Res, Next>): Callbacks<Req, Res, Next> {
  return {
    skip: o.skip as Callbacks<Req, Res, Next>['skip'],
    message: o.message,
    handler: setup.handler ?? (o.handler as Callbacks<Req, Res, Next>['handler']),
    onRejected: o.onRejected as Callbacks<Req, Res, Next>['onRejected'],
    onStoreError: o.onStoreError as Callbacks<Req, Res, Next>['onStoreError'],
  };
}

function pipeline<Req, Res, Next>(
  port: Port<Req, Res, Next>,
  lim: Limiter<Req>,
  o: RateLimitSource<Req>,
  s: RateLimitSetup<Req, Res, Next> & Callbacks<Req, Res, Next>,
  remember: symbol | undefined,
  owner: Limiter<Req> | undefined,
  warnings: ReturnType<typeof proxyWarnings> | undefined,
): Pipeline<Req, Res, Next> {
  const { format, pk, dryRun, name, statusCode } = o;
  const { handler, message, onRejected, onStoreError } = s;
  const timers = o.timers ?? systemTimers;
  const counted = countedRules(lim);
  const reserved = reservations(lim, name, port);
  const firstUnit = nextAdmission(lim);
  const deadline = storeDeadline(lim.store);
  const checkMessage = asMessageBody(`${o.path}.message`);
  const localsOf = localsOn(port);

  function headers(req: Req, res: Res, d: Decision, all: Decision, nextMs: NextMs, fresh: boolean): void {
    const f = format as NonNullable<typeof format>;
    let context: HeaderContext | undefined;
    if (pk || all !== d || nextMs !== undefined) {
      context = { all: all.rules };
      if (nextMs !== undefined) context.next = nextMs;
      if (pk) {
        try {
          context.keys = lim.resolve(req).map((op) => op.key);
        } catch {
          // An async key function: the partition key is left out rather than computed twice.
        }
      }
    }
    const fields = f(d.rules, d.at, context);
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i] as (typeof fields)[number];
      let value = field.value;
      if (field.append && !fresh) value = appendHeaderValue(port.getHeader(res, field.name), value);
      port.setHeader(res, field.name, value);
    }
  }

  function refuse(req: Req, res: Res, next: Next, d: Decision): void {
    const fail = (err: unknown) => port.fail(next, err);
    if (onRejected !== undefined) {
      const r = call(onRejected, req, res, d);
      if (isThenable(r)) Promise.resolve(r).catch(noop);
    }
    // Refused after a handler started the response: counted and reported, the response cut off.
    if (refusedAfterHead(port, res, next)) return;
    const r = refusal(d, { statusCode });
    writeRefusalHead(port, res, r);
    if (handler !== undefined) {
      settle(call(handler, req, res, next, d), asAny, noop, fail);
      return;
    }
    if (message !== undefined && !isCapacityRefusal(d)) {
      settle(call(message, req, d), checkMessage, (body) => port.send(res, r.status, body.contentType, body.text), fail);
      return;
    }
    port.send(res, r.status, r.contentType, JSON.stringify(r.body));
  }

  /** `shown`: the decision whose rules the headers list (the request's whole state after a refund). */
  function answer(req: Req, res: Res, next: Next, d: Decision, all: Decision, nextMs: NextMs, fresh: boolean, shown = d): void {
    if (format !== undefined && port.headersSent?.(res) !== true) headers(req, res, shown, all, nextMs, fresh);
    publishDecision(d, req, name, dryRun);
    if (d.allowed || dryRun) {
      if (d.allowed) reserved(req, res, d);
      exposeSettle(req as object, localsOf(req));
      if (d.allowed && counted.length > 0) refundUncountedOnFinish(lim, counted, req, (fn) => port.onFinish(req, res, fn), d, name);
      if (d.delayMs > 0 && !dryRun) {
        // A client that leaves while waiting never reaches the handler.
        holdRequest(port, req, res, d.delayMs, timers)
          .then((stillThere) => {
            if (stillThere) port.pass(next);
            else dropHeld(port, next);
          })
          .catch((err: unknown) => port.fail(next, err));
        return;
      }
      port.pass(next);
      return;
    }
    refuse(req, res, next, d);
  }

  /** Answers, guarding the app's callbacks: whatever they throw goes to the error handler. */
  function safely(req: Req, res: Res, next: Next, d: Decision, all: Decision, nextMs: NextMs, fresh: boolean, shown = d): void {
    try {
      answer(req, res, next, d, all, nextMs, fresh, shown);
    } catch (err) {
      port.fail(next, err);
    }
  }

  function decided(req: Req, res: Res, next: Next, prior: Decision | undefined, fresh: boolean, d: Decision, t0: number): void {
    if (remember !== undefined) (req as WithDecision)[remember] = d;
    const locals = localsOf(req);
    const all = mergeDecisions(locals.rateLimit, d);
    locals.rateLimit = all;
    if (!d.allowed && !dryRun && prior !== undefined && owner !== undefined) {
      // A route-level refusal: the app-level units go back first, so that the headers and
      // `rateLimit` show the state after the refund.
      owner.refund(req, prior).then(
        () => {
          const after = afterRefund(all, prior);
          locals.rateLimit = after;
          // Every item again, in place of what the earlier stages wrote before the refund.
          safely(req, res, next, d, after, undefined, true, after);
        },
        (err) => {
          publishStoreError(err, req, name, 'allow');
          safely(req, res, next, d, all, undefined, fresh);
        },
      );
      return;
    }
    if (format !== undefined && d.degraded === undefined && firstUnit.needed(d)) {
      // Rare (a rule just ran dry): ask the store when its next unit comes, for an exact `t`,
      // within what is left of the store's deadline: the whole decision stays inside it.
      const left = deadline === undefined ? undefined : deadline - (performance.now() - t0);
      if (left !== undefined && left <= 0) {
        safely(req, res, next, d, all, undefined, fresh);
        return;
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      let over = false;
      if (left !== undefined) {
        timer = setTimeout(() => {
          over = true;
          safely(req, res, next, d, all, undefined, fresh);
        }, left);
        timer.unref?.();
      }
      firstUnit.get(req, d).then(
        (nextMs) => {
          if (timer !== undefined) clearTimeout(timer);
          if (!over) safely(req, res, next, d, all, nextMs, fresh);
        },
        (err) => {
          if (timer !== undefined) clearTimeout(timer);
          if (over) return;
          publishStoreError(err, req, name, 'allow');
          safely(req, res, next, d, all, undefined, fresh);
        },
      );
      return;
    }
    safely(req, res, next, d, all, undefined, fresh);
  }

  function failed(req: Req, res: Res, next: Next, err: unknown): void {
    if (isAppError(err)) {
      port.fail(next, err);
      return;
    }
    if (onStoreError === 'allow') {
      publishStoreError(err, req, name, 'allow');
      port.pass(next);
      return;
    }
    if (onStoreError === 'deny') {
      publishStoreError(err, req, name, 'deny');
      sendRefusal(port, res, storeFailureRefusal());
      return;
    }
    if (onStoreError === 'error') {
      publishStoreError(err, req, name, 'error');
      port.fail(next, err);
      return;
    }
    publishStoreError(err, req, name, 'custom');
    try {
      settle(call(onStoreError, err, req, res, next), asAny, noop, (e) => port.fail(next, e));
    } catch (thrown) {
      port.fail(next, thrown);
    }
  }

  return function decide(req, res, next, prior, fresh = false): void {
    if (warnings !== undefined) {
      try {
        warnings(port, req);
      } catch (err) {
        // A request without the fields the port reads (a mock in the app's tests): the app's error, not a throw out of the middleware.
        port.fail(next, err);
        return;
      }
    }
    const t0 = deadline === undefined ? 0 : performance.now();
    let d: Decision | Promise<Decision>;
    try {
      d = lim.decide(req);
    } catch (err) {
      failed(req, res, next, err);
      return;
    }
    if (isThenable(d)) {
      (d as Promise<Decision>).then(
        (v) => decided(req, res, next, prior, fresh, v, t0),
        (err) => failed(req, res, next, err),
      );
      return;
    }
    decided(req, res, next, prior, fresh, d as Decision, t0);
  };
}
