/**
 * Options of the Fastify plugin and of a route's `config.rateLimit`:
 * their types, and their validation and normalisation, done once at registration so
 * the per-request path only calls functions it already holds. Names mirror
 * `@tollgate/express` (`rateLimit()`), so an option means the same in both adapters.
 */
import {
  type Clock,
  checkOptionNames,
  configError,
  type Decision,
  describeValue,
  type HttpLimiterOptions,
  type HttpOptions,
  type HttpOptionsWording,
  normalizeHttpOptions,
  type OptionNameFixes,
  type Rule,
  type Store,
  type TrustProxy,
  unknownOptionFix,
} from '@tollgate/core';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/** The Fastify hook in which the decision is made. */
export type TollgateHook = 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler';

/** What to do when the store fails to decide (Redis down, timeout). */
export type StoreErrorPolicy =
  | 'allow'
  | 'deny'
  | 'error'
  | ((error: unknown, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void);

export interface TollgateOptions extends HttpLimiterOptions {
  /**
   * The stack: a request passes only if every rule admits it. An empty list limits
   * only the routes that declare `config.rateLimit.rules`.
   * @example rules: [{ name: 'ip', rate: '100/min' }, { name: 'user', key: user((req) => req.user?.id), rate: '1000/h' }]
   */
  rules: Rule<FastifyRequest>[];
  /**
   * Which proxies in front of the app to trust when finding the client address; it
   * configures the `ip()` key of every rule that names no key. Independent of
   * Fastify's own `trustProxy` option (`request.ip`): see docs/fastify.md.
   * @default false
   * @example trustProxy: 'loopback' // nginx on the same machine
   */
  trustProxy?: TrustProxy;
  /**
   * The hook that decides. `onRequest` refuses before the body is read; a later hook
   * lets keys read what earlier hooks set (e.g. `request.user` after authentication).
   * @default 'onRequest'
   * @example hook: 'preHandler' // key: user((req) => req.user?.id) after an auth preValidation hook
   */
  hook?: TollgateHook;
  /**
   * Body of a refusal instead of the RFC 9457 problem: a string (sent as text), an
   * object (sent as JSON), or a function of the request and decision returning either.
   * @example message: (request, decision) => ({ error: 'slow down', retryAfterMs: decision.retryAfterMs })
   */
  message?: string | object | ((request: FastifyRequest, decision: Decision) => string | object);
  /**
   * Answers refused requests yourself. Status, `Retry-After` and the rate-limit headers
   * are already set when it runs; call `reply.send(...)`.
   * @example handler: (request, reply, decision) => reply.send({ over: decision.rejectedBy })
   */
  handler?: (request: FastifyRequest, reply: FastifyReply, decision: Decision) => void;
  /**
   * Requests for which this returns true bypass every rule (health checks, allow-lists).
   * @example skip: (request) => request.url === '/healthz'
   */
  skip?: (request: FastifyRequest, reply: FastifyReply) => boolean | Promise<boolean>;
  /** Called for every refused request (before the response is sent), e.g. for logging. */
  onRejected?: (request: FastifyRequest, reply: FastifyReply, decision: Decision) => void;
  /**
   * When the store fails: `'allow'` lets the request through, `'deny'` answers 503,
   * `'error'` hands the error to Fastify's error handler (a 500 unless you set one), or
   * a function decides (answer with `reply`, or call `done()` to let the request on).
   * Every failure is published on `tollgate:store-error` either way.
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicy;
}

/**
 * A route's `config.rateLimit`: rules added to the plugin-level stack (decided as one
 * stack), and optionally another hook for this route.
 * @example app.post('/login', { config: { rateLimit: { rules: [{ name: 'login', limit: 5, window: '15m' }] } } }, login)
 */
export interface RouteRateLimit {
  /** Rules added to the plugin-level ones for this route. */
  rules?: Rule<FastifyRequest>[];
  /** The hook that decides this route's stack. @default the plugin's `hook` */
  hook?: TollgateHook;
}

export interface Normalised extends HttpOptions<FastifyRequest, TollgateOptions> {
  rules: Rule<FastifyRequest>[];
  store: Store | undefined;
  clock: Clock | undefined;
  prefix: string | undefined;
  hook: TollgateHook;
}

const KNOWN: ReadonlySet<string> = new Set([
  'rules',
  'store',
  'clock',
  'timers',
  'prefix',
  'trustProxy',
  'ipv6Subnet',
  'headers',
  'partitionKey',
  'hook',
  'statusCode',
  'message',
  'handler',
  'skip',
  'dryRun',
  'onRejected',
  'onStoreError',
  'name',
]);

/** @fastify/rate-limit option names, with what replaces each (docs/migrating.md has the whole map). */
const PEER_OPTIONS: Readonly<Record<string, string>> = {
  max: "a rule's limit: rules: [{ name: 'ip', limit: 100, window: '1m' }]",
  timeWindow: "a rule's window: rules: [{ name: 'ip', limit: 100, window: '1m' }]",
  keyGenerator: "a rule's key: rules: [{ name: 'ip', rate: '100/min', key: (req) => ... }]",
  groupId: "a rule's group: rules: [{ name: 'export', group: 'export', ... }]",
  global: 'rules: [] (only routes with config.rateLimit.rules are limited)',
  allowList: 'skip: (request) => allowed.has(request.ip)',
  errorResponseBuilder: 'message: (request, decision) => body, or handler',
  skipOnError: "onStoreError: 'allow' (the default)",
  addHeaders: 'headers',
  addHeadersOnExceeding: 'headers',
  enableDraftSpec: "headers: 'draft-6' (or the default 'draft-10')",
  nameSpace: 'prefix',
  onExceeding: 'the tollgate:decision diagnostics channel',
  onExceeded: 'onRejected',
  exponentialBackoff: "a rule's blockFor, or countRejected: true",
  ban: "a rule's blockFor",
  continueExceeding: 'countRejected: true on the rule',
  redis: 'store: new RedisStore({ client })',
  cache: 'store: new MemoryStore({ maxKeys })',
};

const HOOKS: readonly TollgateHook[] = ['onRequest', 'preParsing', 'preValidation', 'preHandler'];

const NAME_FIXES: OptionNameFixes = {
  notObject: "Register with app.register(tollgate, { rules: [{ name: 'ip', rate: '100/min' }] }).",
  unknown: (name) => {
    const peer = PEER_OPTIONS[name];
    return peer === undefined
      ? 'Remove the option or check its spelling.'
      : `That is an @fastify/rate-limit option; use ${peer} (docs/migrating.md maps every option).`;
  },
};

/** The plugin's name and signatures in the shared options' error messages. */
const WORDING: HttpOptionsWording = {
  path: 'tollgate',
  handler: 'a function (request, reply, decision)',
  skip: 'a function (request, reply) => boolean',
  onRejected: 'a function (request, reply, decision)',
  onStoreError: "'allow', 'deny', 'error' or a function (error, request, reply, done)",
  message: 'a string, an object, or a function (request, decision) => string | object',
  timersFix: 'Leave it out (process timers), or pass new ManualTimers(clock) in tests.',
};

/** Validates a hook name (plugin option or route config). */
export function hookOption(value: unknown, path: string): TollgateHook {
  if (!HOOKS.includes(value as TollgateHook)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `one of ${HOOKS.map((h) => `'${h}'`).join(', ')}`,
      received: describeValue(value),
      fix: "Keep the default 'onRequest', or use 'preHandler' for keys that need the authenticated user.",
    });
  }
  return value as TollgateHook;
}

/** Validates the plugin options; rules themselves are validated by the core limiter. */
export function normalise(options: TollgateOptions): Normalised {
  checkOptionNames(options, 'tollgate', KNOWN, NAME_FIXES);
  const o = options;
  if (!Array.isArray(o.rules)) {
    throw configError('TG_NO_RULES', {
      path: 'tollgate.rules',
      expected: 'an array of rules (empty to limit only routes with config.rateLimit.rules)',
      received: describeValue(o.rules),
      fix: "Pass rules: [{ name: 'ip', rate: '100/min' }].",
    });
  }
  const shared = normalizeHttpOptions<FastifyRequest, TollgateOptions>(o, WORDING);
  return {
    ...shared,
    rules: o.rules,
    store: o.store,
    clock: o.clock,
    prefix: o.prefix,
    hook: o.hook === undefined ? 'onRequest' : hookOption(o.hook, 'tollgate.hook'),
  };
}

/**
 * Validates a route's `config.rateLimit` (anything but `false`, which the plugin
 * handles first). `where` names the route in messages, e.g. `POST /login`.
 */
export function routeOption(value: unknown, where: string): RouteRateLimit {
  const path = `${where} config.rateLimit`;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'false or an object { rules?, hook? }',
      received: describeValue(value),
      fix: "Write config: { rateLimit: { rules: [{ name: 'login', limit: 5, window: '15m' }] } }, or false to turn limiting off.",
    });
  }
  const extra = Object.keys(value).find((k) => k !== 'rules' && k !== 'hook');
  if (extra !== undefined) {
    const peer = PEER_OPTIONS[extra];
    throw configError('TG_UNKNOWN_OPTION', {
      path: `${path}.${extra}`,
      expected: 'rules or hook',
      received: JSON.stringify(extra),
      fix:
        peer === undefined
          ? unknownOptionFix(extra, ['rules', 'hook'], 'Route-level options other than rules and hook come from the plugin registration.')
          : `That is an @fastify/rate-limit option; use ${peer} in the route's rules (docs/migrating.md).`,
    });
  }
  const v = value as RouteRateLimit;
  const out: RouteRateLimit = {};
  if (v.rules !== undefined) {
    if (!Array.isArray(v.rules)) {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.rules`,
        expected: 'an array of rules',
        received: describeValue(v.rules),
        fix: "Write rules: [{ name: 'login', limit: 5, window: '15m' }].",
      });
    }
    out.rules = v.rules;
  }
  if (v.hook !== undefined) out.hook = hookOption(v.hook, `${path}.hook`);
  return out;
}
