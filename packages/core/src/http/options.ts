/**
 * The options of a limiter adapter, once for every framework: their types (the
 * callbacks typed by the adapter's request, response and continuation), the option
 * names every adapter knows, and validation into what `createRateLimit` takes. An
 * adapter adds its own options (Fastify's `hook`, Express' `passOnStoreError`) and its
 * callbacks' signatures for the wording of errors.
 */

import { configError, describe } from '../errors.js';
import { checkOptionNames, type HttpLimiterOptions, type HttpOptionsWording, normalizeHttpOptions } from '../http-options.js';
import type { Rule } from '../rules.js';
import { unknownOptionFix } from '../suggest.js';
import type { Decision } from '../types.js';
import { type AccessList, compileAccess } from './access.js';
import type { RateLimitSource, RouteMode } from './rate-limit.js';

/** What to do when the store fails to decide (Redis down, timeout). */
export type StoreErrorPolicyOf<Req, Res, Next> = 'allow' | 'deny' | 'error' | ((error: unknown, req: Req, res: Res, next: Next) => void);

/** The callbacks of a limiter, typed by the adapter. Each may return a value or a promise of one. */
export interface HttpCallbackOptions<Req, Res, Next> {
  /**
   * Body of a refusal instead of the RFC 9457 problem: a string (sent as text), an
   * object (sent as JSON), or a function of the request and decision returning either.
   * @example message: (req, decision) => ({ error: 'slow down', retryAfterMs: decision.retryAfterMs })
   */
  message?: string | object | ((req: Req, decision: Decision) => string | object | Promise<string | object>);
  /**
   * Requests for which this returns true bypass every rule (health checks, allow-lists).
   * @example skip: (req) => req.url === '/healthz'
   */
  skip?: (req: Req, res: Res) => boolean | Promise<boolean>;
  /**
   * Clients that bypass every rule, like `skip` (nothing is counted): addresses and CIDRs
   * matched on the client address as the default `ip()` key finds it with this limiter's
   * `trustProxy` (never on a forwarding header a client could write), or a function of
   * the request returning a boolean (or a promise of one).
   * @example allow: ['10.0.0.0/8', '2001:db8:1::/48']
   */
  allow?: AccessList<Req>;
  /**
   * Clients refused with 403 (an RFC 9457 problem body) before any rule or store call,
   * matched like `allow`; a client on both lists is denied.
   * @example deny: ['203.0.113.0/24'] // or deny: async (req) => isBanned(req)
   */
  deny?: AccessList<Req>;
  /** Called for every refused request (before the response is sent), e.g. for logging. */
  onRejected?: (req: Req, res: Res, decision: Decision) => void;
  /**
   * When the store fails: `'allow'` lets the request through, `'deny'` answers 503,
   * `'error'` hands the error to the framework's error handler, or a function decides
   * (answer the request, or call `next()` to let it on). Every failure is published on
   * `tollgate:store-error` either way.
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicyOf<Req, Res, Next>;
}

/** A limiter adapter's options: the shared ones, the callbacks and the rules. */
export interface LimiterOptionsOf<Req, Res, Next> extends HttpLimiterOptions, HttpCallbackOptions<Req, Res, Next> {
  /**
   * The stack: a request passes only if every rule admits it (may be left out with `tiers`).
   * @example rules: [{ name: 'ip', rate: '100/min' }, { name: 'user', key: user((req) => req.user?.id), rate: '1000/h' }]
   */
  rules?: Rule<Req>[];
  /**
   * Named rule stacks, one of which joins `rules` per request, picked by `tier`; decided
   * with them as one all-or-nothing decision. Rule names are unique across `rules` and
   * every tier (give two tiers' rules one `group` to share a budget).
   * @example tiers: { free: [{ name: 'free', rate: '100/min' }], pro: [{ name: 'pro', rate: '5000/min' }] }
   */
  tiers?: Record<string, Rule<Req>[]>;
  /**
   * The tier of a request (with `tiers`), or a promise of it. A name that is not a tier is
   * a coded error (`TG_INVALID_CALLBACK_RESULT`) handed to the error handler, never an admission.
   * @example tier: (req) => req.user?.plan ?? 'free'
   */
  tier?: (req: Req) => string | Promise<string>;
}

/** The option names every limiter adapter knows. */
export const LIMITER_OPTION_NAMES: readonly string[] = [
  'rules',
  'tiers',
  'tier',
  'store',
  'clock',
  'timers',
  'prefix',
  'trustProxy',
  'ipv6Subnet',
  'headers',
  'partitionKey',
  'statusCode',
  'message',
  'handler',
  'skip',
  'allow',
  'deny',
  'dryRun',
  'onRejected',
  'onStoreError',
  'name',
];

/** How an adapter names itself and its callbacks' arguments in errors. */
export interface AdapterWording {
  /** The error path's root: `'rateLimit'`, `'tollgate'`. */
  path: string;
  /**
   * The request, response and continuation as the adapter's docs name them: `['req', 'res',
   * 'next']`; or the context and continuation of a framework whose one context object is
   * both (Koa: `['ctx', 'next']`), whose callbacks then take it once: `skip(ctx)`,
   * `onRejected(ctx, decision)`, `onStoreError(error, ctx, next)`.
   */
  names: readonly [req: string, res: string, next: string] | readonly [ctx: string, next: string];
  /** The handler's arguments when they are not the three names and the decision (Fastify's has no continuation). */
  handler?: string;
  /** The fix when the options are not an object. */
  notObject: string;
  /** A fix for an unknown option name (a peer's option), when there is one. */
  hint?: (name: string) => string | undefined;
  /** Set when the stack may be empty (Fastify: only routes with rules of their own are limited): what `rules` then is. */
  emptyRules?: string;
}

/**
 * The wording of a port whose limiter is `rateLimit(options)` over Node-style
 * `(req, res, next)` (Express, node): an adapter adds its own hints.
 */
export const RATE_LIMIT_WORDING: AdapterWording = {
  path: 'rateLimit',
  names: ['req', 'res', 'next'],
  notObject: "Call rateLimit({ rules: [{ name: 'ip', rate: '100/min' }] }).",
};

/** An adapter's own options, each with the check that reads it into its value. */
export type OwnOptionChecks<Own> = { readonly [K in keyof Own]: (value: unknown, path: string) => Own[K] };

/**
 * Validates a limiter adapter's options (names, shared options) into what
 * `createRateLimit` takes. `own`: the adapter's own options (Fastify's `hook`), each read
 * by its check (given `undefined` when left out, for its default).
 */
export function normalizeLimiterOptions<Req, O extends LimiterOptionsOf<Req, never, never>, Own = object>(
  options: O,
  w: AdapterWording,
  own?: OwnOptionChecks<Own>,
): RateLimitSource<Req, O> & Own {
  const checks: Record<string, (value: unknown, path: string) => unknown> = own ?? {};
  const known = new Set([...LIMITER_OPTION_NAMES, ...Object.keys(checks)]);
  checkOptionNames(options, w.path, known, { notObject: w.notObject, unknown: w.hint });
  if (w.emptyRules !== undefined && !Array.isArray(options.rules)) {
    throw configError('TG_NO_RULES', {
      path: `${w.path}.rules`,
      expected: w.emptyRules,
      received: describe(options.rules),
      fix: "Pass rules: [{ name: 'ip', rate: '100/min' }].",
    });
  }
  const req = w.names[0];
  const next = w.names.length === 3 ? w.names[2] : w.names[1];
  // The request and the response, or the one context object.
  const both = w.names.length === 3 ? `${req}, ${w.names[1]}` : req;
  const wording: HttpOptionsWording = {
    path: w.path,
    handler: `a function ${w.handler ?? `(${both}, ${next}, decision)`}`,
    skip: `a function (${both}) => boolean`,
    onRejected: `a function (${both}, decision)`,
    onStoreError: `'allow', 'deny', 'error' or a function (error, ${both}, ${next})`,
    message: `a string, an object, or a function (${req}, decision) => string | object`,
  };
  const shared = normalizeHttpOptions<Req, O>(options, wording);
  const access = compileAccess<Req>(options.allow, options.deny, { path: w.path, trustProxy: options.trustProxy });
  const values = Object.entries(checks).map(([name, check]) => [
    name,
    check((options as Record<string, unknown>)[name], `${w.path}.${name}`),
  ]);
  return {
    ...(Object.fromEntries(values) as Own),
    ...shared,
    path: w.path,
    allowEmpty: w.emptyRules !== undefined,
    rules: options.rules as Rule<Req>[],
    tiers: options.tiers,
    tier: options.tier,
    store: options.store,
    clock: options.clock,
    prefix: options.prefix,
    access,
  };
}

/**
 * Validates an option naming one of `choices`; left out, it is the first (the default).
 * @example choiceOption(options.mode, ['add', 'replace'], 'route.mode', "Use mode: 'replace' for ...")
 */
export function choiceOption<T extends string>(value: unknown, choices: readonly T[], path: string, fix: string): T {
  if (value === undefined) return choices[0] as T;
  if (choices.includes(value as T)) return value as T;
  const [first, ...others] = choices.map((c) => `'${c}'`);
  throw configError('TG_INVALID_OPTION', {
    path,
    expected: `${first} (the default)${others.length > 1 ? `, ${others.slice(0, -1).join(', ')},` : ''} or ${others.at(-1)}`,
    received: describe(value),
    fix,
  });
}

/** Validates a route's `mode` option. */
export function routeMode(value: unknown, path: string): RouteMode {
  return choiceOption<RouteMode>(
    value,
    ['add', 'replace'],
    path,
    "Use mode: 'replace' for a route whose rules stand instead of the app-level ones.",
  );
}

/** Route-level rules of an app-level limiter (`limiter.route({ rules, mode })`). */
export interface RouteOptionsOf<Req> {
  rules: Rule<Req>[];
  /**
   * `'add'`: the route's rules join the app-level ones (both must admit). `'replace'`: the
   * route's rules stand alone (e.g. a bulk endpoint with a higher limit); mount the route
   * before the app-level limiter so that the app-level rules never refuse it.
   * @default 'add'
   */
  mode?: RouteMode;
}

/** Where and how a port's route options are named in errors, and the port's own ones. */
export interface RouteOptionsShape<Own = object> {
  /** The options' place: `'route'` (`limiter.route()`), `'POST /login config.rateLimit'`. */
  path: string;
  /** The port's own options beside `rules` and `mode` (Fastify: `hook`), each with its check (called when it is given). */
  own?: OwnOptionChecks<Own>;
  /** What an invalid value should be, e.g. `'an options object { rules, mode? }'`. */
  expected: string;
  /** The fix when nothing better is known. */
  fix: string;
  /** A fix for an unknown name (a peer's option name), when there is one. */
  hint?: (name: string) => string | undefined;
  /** `rules` may be left out (read as none). @default false */
  optionalRules?: boolean;
}

const LIMITER_ROUTE: RouteOptionsShape = {
  path: 'route',
  expected: 'an options object { rules, mode? }',
  fix: "Call limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }); other options come from the app-level limiter.",
};

/**
 * Validates route-level options (`limiter.route()`, Fastify's `config.rateLimit`): an
 * object naming only `rules` (an array), `mode` and the port's own names.
 */
export function routeOptionsOf<Req, Own = object>(
  o: unknown,
  shape: RouteOptionsShape<Own> = LIMITER_ROUTE as RouteOptionsShape<Own>,
): Required<RouteOptionsOf<Req>> & Partial<Own> {
  const checks: Record<string, (value: unknown, path: string) => unknown> = shape.own ?? {};
  const known = ['rules', 'mode', ...Object.keys(checks)];
  const shapeless = typeof o !== 'object' || o === null || Array.isArray(o);
  const extra = shapeless ? undefined : Object.keys(o).find((k) => !known.includes(k));
  if (shapeless || extra !== undefined) {
    throw configError(extra === undefined ? 'TG_INVALID_OPTION' : 'TG_UNKNOWN_OPTION', {
      path: extra === undefined ? shape.path : `${shape.path}.${extra}`,
      expected: extra === undefined ? shape.expected : `${known.slice(0, -1).join(', ')} or ${known.at(-1)}`,
      received: extra === undefined ? describe(o) : JSON.stringify(extra),
      fix: (extra === undefined ? undefined : shape.hint?.(extra)) ?? unknownOptionFix(extra ?? '', known, shape.fix),
    });
  }
  const r = o as RouteOptionsOf<Req>;
  if (r.rules === undefined ? shape.optionalRules !== true : !Array.isArray(r.rules)) {
    throw configError('TG_INVALID_OPTION', {
      path: `${shape.path}.rules`,
      expected: 'an array of rules',
      received: describe(r.rules),
      fix: "Write rules: [{ name: 'login', limit: 5, window: '15m' }].",
    });
  }
  const mode = routeMode(r.mode, `${shape.path}.mode`);
  const own: Record<string, unknown> = {};
  for (const [name, check] of Object.entries(checks)) {
    const value = (o as Record<string, unknown>)[name];
    if (value !== undefined) own[name] = check(value, `${shape.path}.${name}`);
  }
  return { ...(own as Partial<Own>), rules: r.rules ?? [], mode };
}
