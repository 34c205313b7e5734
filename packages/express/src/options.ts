/**
 * Options of `rateLimit()` (SPEC 9, 13): their types, and their validation and
 * normalisation, done once at construction so the per-request path only calls
 * functions it already holds.
 */
import {
  checkOptionNames,
  configError,
  type Decision,
  describeValue,
  type HttpLimiterOptions,
  type HttpOptionsWording,
  normalizeHttpOptions,
  type OptionNameFixes,
  type Rule,
  type TrustProxy,
} from '@tollgate/core';
import type { RateLimitSource } from '@tollgate/core/http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** What to do when the store fails to decide (Redis down, timeout). */
export type StoreErrorPolicy = 'allow' | 'deny' | 'error' | ((error: unknown, req: Request, res: Response, next: NextFunction) => void);

export interface RateLimitOptions extends HttpLimiterOptions {
  /**
   * The stack: a request passes only if every rule admits it.
   * @example rules: [{ name: 'ip', rate: '100/min' }, { name: 'user', key: user((req) => req.user?.id), rate: '1000/h' }]
   */
  rules: Rule<Request>[];
  /**
   * Which proxies in front of the app to trust when finding the client address; it
   * configures the `ip()` key of every rule that names no key. Independent of
   * Express's own `trust proxy` setting. See docs/keys-and-proxies.md.
   * @default false
   * @example trustProxy: 'loopback' // nginx on the same machine
   */
  trustProxy?: TrustProxy;
  /**
   * Body of a refusal instead of the RFC 9457 problem: a string (sent as text), an
   * object (sent as JSON), or a function of the request and decision returning either.
   */
  message?: string | object | ((req: Request, decision: Decision) => string | object);
  /**
   * Answers refused requests yourself. Status, `Retry-After` and the rate-limit headers
   * are already set when it runs; call `res.send(...)` (or `next()` to let the request on).
   */
  handler?: (req: Request, res: Response, next: NextFunction, decision: Decision) => void;
  /**
   * Requests for which this returns true bypass every rule (health checks, allow-lists).
   * @example skip: (req) => req.path === '/healthz'
   */
  skip?: (req: Request, res: Response) => boolean | Promise<boolean>;
  /** Called for every refused request (before the response is sent), e.g. for logging. */
  onRejected?: (req: Request, res: Response, decision: Decision) => void;
  /**
   * When the store fails: `'allow'` lets the request through, `'deny'` answers 503,
   * `'error'` passes the error to Express's error handler, or a function decides.
   * Every failure is published on `tollgate:store-error` either way.
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicy;
  /** express-rate-limit's spelling: `true` is `onStoreError: 'allow'`, `false` is `'error'`. */
  passOnStoreError?: boolean;
}

/** Route-level rules of an app-level limiter (`limiter.route({ rules, mode })`). */
export interface RouteOptions {
  rules: Rule<Request>[];
  /**
   * `'add'`: the route's rules join the app-level ones (both must admit). `'replace'`: the
   * route's rules stand alone for this route (e.g. a bulk endpoint with a higher limit);
   * mount the route before `app.use(limiter)` so the app-level rules never refuse it.
   * @default 'add'
   */
  mode?: 'add' | 'replace';
}

export interface Normalised extends RateLimitSource<Request, RateLimitOptions> {
  rules: Rule<Request>[];
}

const KNOWN: ReadonlySet<string> = new Set([
  'rules',
  'store',
  'clock',
  'prefix',
  'trustProxy',
  'ipv6Subnet',
  'headers',
  'partitionKey',
  'statusCode',
  'message',
  'handler',
  'skip',
  'dryRun',
  'onRejected',
  'onStoreError',
  'passOnStoreError',
  'name',
  'timers',
]);

const NAME_FIXES: OptionNameFixes = {
  notObject: "Call rateLimit({ rules: [{ name: 'ip', rate: '100/min' }] }).",
  unknown: () => 'Remove the option or check its spelling (docs/migrating.md maps express-rate-limit options).',
};

/** The middleware's name and signatures in the shared options' error messages. */
const WORDING: HttpOptionsWording = {
  path: 'rateLimit',
  handler: 'a function (req, res, next, decision)',
  skip: 'a function (req, res) => boolean',
  onRejected: 'a function (req, res, decision)',
  onStoreError: "'allow', 'deny', 'error' or a function (err, req, res, next)",
  message: 'a string, an object, or a function (req, decision) => string | object',
  timersFix: 'Pass new ManualTimers(clock) in tests, or leave it out.',
};

/** Validates `rateLimit()` options; rules themselves are validated by the core limiter. */
export function normalise(options: RateLimitOptions): Normalised {
  checkOptionNames(options, 'rateLimit', KNOWN, NAME_FIXES);
  const o = options;
  let input = o;
  if (o.passOnStoreError !== undefined) {
    if (o.onStoreError !== undefined) {
      throw configError('TG_INVALID_OPTION', {
        path: 'rateLimit.passOnStoreError',
        expected: 'onStoreError or passOnStoreError, not both',
        received: 'both',
        fix: 'Keep onStoreError.',
      });
    }
    if (typeof o.passOnStoreError !== 'boolean') {
      throw configError('TG_INVALID_OPTION', {
        path: 'rateLimit.passOnStoreError',
        expected: 'true or false',
        received: describeValue(o.passOnStoreError),
        fix: "Prefer onStoreError: 'allow' | 'deny' | 'error'.",
      });
    }
    // express-rate-limit's spelling, translated before the shared checks.
    input = { ...o, onStoreError: o.passOnStoreError ? 'allow' : 'error' };
  }
  const shared = normalizeHttpOptions<Request, RateLimitOptions>(input, WORDING);
  return {
    ...shared,
    rules: o.rules,
    store: o.store,
    clock: o.clock,
    prefix: o.prefix,
  };
}

/** Validates `limiter.route()` options. */
export function routeOptions(o: unknown): RouteOptions {
  if (typeof o !== 'object' || o === null) {
    throw configError('TG_INVALID_OPTION', {
      path: 'route',
      expected: 'an options object { rules, mode? }',
      received: describeValue(o),
      fix: "Call limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }).",
    });
  }
  const extra = Object.keys(o).find((k) => k !== 'rules' && k !== 'mode');
  if (extra !== undefined) {
    throw configError('TG_UNKNOWN_OPTION', {
      path: `route.${extra}`,
      expected: 'rules or mode',
      received: JSON.stringify(extra),
      fix: 'Route-level options other than rules and mode come from the app-level limiter.',
    });
  }
  return o as RouteOptions;
}

/** The middleware `rateLimit()` returns, with its route-level extension. */
export interface RateLimitMiddleware extends RequestHandler {
  /**
   * A route-level middleware adding `rules` to this limiter's: the route's request
   * passes only if both the app-level and the route-level rules admit it, and a
   * route-level refusal gives back what the app-level check consumed. With
   * `mode: 'replace'` the route's rules stand instead of the app-level ones.
   * @example app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }), login)
   */
  route(options: RouteOptions): RequestHandler;
  /** Forgets the request's counters for every app-level rule (e.g. after a successful login). */
  reset(req: Request): Promise<void>;
  /** Decides the request against the app-level rules without consuming anything. */
  peek(req: Request): Promise<Decision>;
}
