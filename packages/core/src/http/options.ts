/**
 * The options of a limiter adapter, once for every framework: their types (the
 * callbacks typed by the adapter's request, response and continuation), the option
 * names every adapter knows, and validation into what `createRateLimit` takes. An
 * adapter adds its own options (Fastify's `hook`, Express' `passOnStoreError`) and its
 * callbacks' signatures for the wording of errors.
 */

import { configError, describe } from '../errors.js';
import {
  checkOptionNames,
  type HttpLimiterOptions,
  type HttpOptionsWording,
  normalizeHttpOptions,
  type OptionNameFixes,
} from '../http-options.js';
import type { Rule } from '../rules.js';
import { unknownOptionFix } from '../suggest.js';
import type { Decision } from '../types.js';
import { type AccessList, compileAccess } from './access.js';
import { type RateLimitSource, type RouteMode, routeMode } from './rate-limit.js';

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
   * The stack: a request passes only if every rule admits it.
   * @example rules: [{ name: 'ip', rate: '100/min' }, { name: 'user', key: user((req) => req.user?.id), rate: '1000/h' }]
   */
  rules: Rule<Req>[];
}

/** The option names every limiter adapter knows. */
export const LIMITER_OPTION_NAMES: readonly string[] = [
  'rules',
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
  /** The request, response and continuation as the adapter's docs name them. */
  req: string;
  res: string;
  next: string;
  /** The handler's signature, e.g. `'(req, res, next, decision)'`. */
  handler: string;
  fixes: OptionNameFixes;
  timersFix: string;
}

/**
 * Validates a limiter adapter's options (names, shared options) into what
 * `createRateLimit` takes. `extra`: the adapter's own option names.
 */
export function normalizeLimiterOptions<Req, O extends LimiterOptionsOf<Req, never, never>>(
  options: O,
  w: AdapterWording,
  extra: readonly string[] = [],
): RateLimitSource<Req, O> {
  checkOptionNames(options, w.path, new Set([...LIMITER_OPTION_NAMES, ...extra]), w.fixes);
  const { req, res, next } = w;
  const wording: HttpOptionsWording = {
    path: w.path,
    handler: `a function ${w.handler}`,
    skip: `a function (${req}, ${res}) => boolean`,
    onRejected: `a function (${req}, ${res}, decision)`,
    onStoreError: `'allow', 'deny', 'error' or a function (error, ${req}, ${res}, ${next})`,
    message: `a string, an object, or a function (${req}, decision) => string | object`,
    timersFix: w.timersFix,
  };
  const shared = normalizeHttpOptions<Req, O>(options, wording);
  const access = compileAccess<Req>(options.allow, options.deny, { path: w.path, trustProxy: options.trustProxy });
  return { ...shared, rules: options.rules, store: options.store, clock: options.clock, prefix: options.prefix, access };
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

/** Validates `limiter.route()` options. */
export function routeOptionsOf<Req>(o: unknown): Required<RouteOptionsOf<Req>> {
  const extra = typeof o === 'object' && o !== null ? Object.keys(o).find((k) => k !== 'rules' && k !== 'mode') : undefined;
  if (typeof o !== 'object' || o === null || extra !== undefined) {
    throw configError(extra === undefined ? 'TG_INVALID_OPTION' : 'TG_UNKNOWN_OPTION', {
      path: extra === undefined ? 'route' : `route.${extra}`,
      expected: extra === undefined ? 'an options object { rules, mode? }' : 'rules or mode',
      received: extra === undefined ? describe(o) : JSON.stringify(extra),
      fix: unknownOptionFix(
        extra ?? '',
        ['rules', 'mode'],
        "Call limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }); other options come from the app-level limiter.",
      ),
    });
  }
  const r = o as RouteOptionsOf<Req>;
  return { rules: r.rules, mode: routeMode(r.mode, 'route.mode') };
}
