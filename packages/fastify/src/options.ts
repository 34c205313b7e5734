/**
 * Options of the Fastify plugin and of a route's `config.rateLimit`, typed for Fastify and
 * validated by core (`normalizeLimiterOptions`, `routeOptionsOf`) with Fastify's wording.
 */
import type { Decision, Rule } from '@tollgate/core';
import {
  type AdapterWording,
  choiceOption,
  FASTIFY_RATE_LIMIT_OPTIONS,
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  peerHint,
  type RateLimitSource,
  type RouteMode,
  routeOptionsOf,
  type StoreErrorPolicyOf,
} from '@tollgate/core/http';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/** The Fastify hook in which the decision is made. */
export type TollgateHook = 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler';

/** What to do when the store fails to decide (Redis down, timeout). */
export type StoreErrorPolicy = StoreErrorPolicyOf<FastifyRequest, FastifyReply, HookHandlerDoneFunction>;

export interface TollgateOptions extends LimiterOptionsOf<FastifyRequest, FastifyReply, HookHandlerDoneFunction> {
  /**
   * The hook that decides. `onRequest` refuses before the body is read; a later hook
   * lets keys read what earlier hooks set (e.g. `request.user` after authentication).
   * @default 'onRequest'
   */
  hook?: TollgateHook;
  /**
   * Answers refused requests yourself. Status, `Retry-After` and the rate-limit headers
   * are already set when it runs; call `reply.send(...)`.
   */
  handler?: (request: FastifyRequest, reply: FastifyReply, decision: Decision) => unknown;
}

/**
 * A route's `config.rateLimit`: rules added to the plugin-level stack (`mode: 'add'`,
 * decided as one stack) or standing instead of it (`mode: 'replace'`), and optionally
 * another hook for this route.
 * @example app.post('/bulk', { config: { rateLimit: { rules: [{ name: 'bulk', rate: '1000/min' }], mode: 'replace' } } }, bulk)
 */
export interface RouteRateLimit {
  rules?: Rule<FastifyRequest>[];
  /** @default 'add' */
  mode?: RouteMode;
  /** @default the plugin's `hook` */
  hook?: TollgateHook;
}

const HOOKS: readonly TollgateHook[] = ['onRequest', 'preParsing', 'preValidation', 'preHandler'];
const hookOption = (value: unknown, path: string) =>
  choiceOption(value, HOOKS, path, "Keep the default 'onRequest', or use 'preHandler' for keys that need the authenticated user.");
const fromPeer = peerHint('@fastify/rate-limit', FASTIFY_RATE_LIMIT_OPTIONS);
const WORDING: AdapterWording = {
  path: 'tollgate',
  names: ['request', 'reply', 'done'],
  handler: '(request, reply, decision)',
  notObject: "Register with app.register(tollgate, { rules: [{ name: 'ip', rate: '100/min' }] }).",
  hint: fromPeer,
  emptyRules: 'an array of rules (empty to limit only routes with config.rateLimit.rules)',
};

/** Validates the plugin options; rules themselves are validated by the core limiter. */
export function normalise(options: TollgateOptions): RateLimitSource<FastifyRequest, TollgateOptions> & { hook: TollgateHook } {
  return normalizeLimiterOptions<FastifyRequest, TollgateOptions, { hook: TollgateHook }>(options, WORDING, { hook: hookOption });
}

/** Validates a route's `config.rateLimit` (anything but `false`); `where` is e.g. `POST /login`. */
export function routeOption(value: unknown, where: string): RouteRateLimit {
  return routeOptionsOf<FastifyRequest, Pick<RouteRateLimit, 'hook'>>(value, {
    path: `${where} config.rateLimit`,
    own: { hook: hookOption },
    optionalRules: true,
    expected: 'false or an object { rules?, mode?, hook? }',
    fix: "Write config: { rateLimit: { rules: [{ name: 'login', limit: 5, window: '15m' }] } }, or false to turn limiting off.",
    hint: fromPeer,
  });
}
