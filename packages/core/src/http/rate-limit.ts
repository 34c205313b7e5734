/**
 * A limiter over HTTP, written once for every framework: its stacks (app-level, tiers,
 * routes), each one skip → allow and deny lists → the stack's pipeline (pipeline.ts: one
 * store decision, headers, pass, hold or refuse), route stages, updates and operations by
 * key over all of them. Adapters reach it through their {@link HttpPort} and mount what
 * {@link createRateLimit} returns.
 *
 * Everything is built once per limiter (or per route stack); a request only calls
 * functions that already exist, and with an in-process store and synchronous
 * callbacks it is answered in the tick it arrived in.
 */

import { guardAppFn, guardRules } from '../app-errors.js';
import type { Clock } from '../clock.js';
import { publishStoreError } from '../diagnostics.js';
import type { HttpOptions, HttpOptionsInput } from '../http-options.js';
import { createLimiterIn, type Limiter, type LimiterOptions, ruleFamily, updateRule } from '../limiter.js';
import { MemoryStore } from '../memory-store.js';
import { type KeyOperations, keyOperations, type OperationSource } from '../operations.js';
import type { KeyFn, Rule, RuleChanges } from '../rules.js';
import type { Decision, Store } from '../types.js';
import type { Access } from './access.js';
import { accessGate, skipGate } from './gates.js';
import { callbacks, type Pipeline, pipeline, type WithDecision } from './pipeline.js';
import { type HttpPort, localsOf as localsOn, type RequestLocals, readerMark } from './port.js';
import { guardTiers, ruleRegistry } from './rule-registry.js';
import { shownDecision } from './settle.js';
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

type Port<Req, Res, Next> = HttpPort<Req, Res, Next>;

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
  const { common, family, limiter } = appLimiter(o, store);
  const operationSource = ruleRegistry<Req>(store, o.clock);
  if (limiter !== undefined) operationSource.learn(limiter);
  const slot = Symbol(`tollgate:${o.name}`);
  // Whether route stages may read `slot` (see RateLimitSetup.routeStages).
  const marking = s.routeStages !== false;
  const localsOf = localsOn(port);
  // A request let through undecided (skipped, allowed) is marked so route stages let it through too.
  const skipMark = marking
    ? (req: Req) => {
        (req as WithDecision)[slot] = null;
      }
    : undefined;
  const skip = s.skip;
  const skipThen = skip === undefined ? undefined : skipGate(port, skip, `${o.path}.skip`, skipMark);

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
  const accessThen = access === undefined ? undefined : accessGate(port, access, o.dryRun === true, skipMark);

  function stack(lim: Limiter<Req>): Decide<Req, Res, Next> {
    const p = pipelineOf(lim);
    // Called with three arguments: no prior decision, headers appended.
    if (skipThen === undefined && accessThen === undefined) return p as Decide<Req, Res, Next>;
    const skipped: Decide<Req, Res, Next> =
      skipThen === undefined
        ? (p as Decide<Req, Res, Next>)
        : (req, res, next) => skipThen(req, res, next, () => p(req, res, next, undefined, false));
    if (accessThen === undefined) return skipped;
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
      : accessThen !== undefined
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
      const replace = mode === 'replace' ? { limiter, localsOf, name: o.name } : undefined;
      return reading(routeStage(port, slot, stack(whole), pipelineOf(alone), replace));
    },
    update: (ruleName, changes) => updateRule(family, ruleName, changes),
    operations: keyOperations(operationSource),
    operationSource,
    close: () => (ownStore === undefined ? Promise.resolve() : ownStore.close()),
  };
}

/** The options every stack of an adapter instance shares, its rule family, and the app-level limiter (none for an empty stack). */
function appLimiter<Req>(o: RateLimitSource<Req>, store: Store) {
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
  return { common, family, limiter };
}

/**
 * A route stage after the app-level stage (Express, node): without the app-level decision on
 * the request, `decideWhole` decides app-level and route rules at once; after it, `'add'`
 * decides the route's rules alone with that decision given back on a refusal, and
 * `'replace'` (`replace` given) gives that decision back first and decides the route's rules
 * alone. A request the app-level stage let through undecided goes on.
 */
function routeStage<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  slot: symbol,
  decideWhole: Decide<Req, Res, Next>,
  decideAlone: Pipeline<Req, Res, Next>,
  replace: { limiter: Limiter<Req> | undefined; localsOf: (req: Req) => RequestLocals; name: string } | undefined,
): Decide<Req, Res, Next> {
  return function routeStage(req, res, next) {
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
    if (replace === undefined) {
      decideAlone(req, res, next, prior, false);
      return;
    }
    // 'replace' after the app-level stage: its units go back, the route's rules decide alone.
    (req as WithDecision)[slot] = undefined;
    const locals = replace.localsOf(req);
    const fresh = shownDecision(locals.rateLimit) === prior;
    if (fresh) locals.rateLimit = undefined;
    replace.limiter?.refund(req, prior).then(
      () => decideAlone(req, res, next, undefined, fresh),
      (err) => {
        publishStoreError(err, req, replace.name, 'allow');
        decideAlone(req, res, next, undefined, fresh);
      },
    );
  };
}
