/**
 * @tollgate/fastify — the Fastify 5 plugin.
 *
 * `await app.register(tollgate, { rules })`, per route `config.rateLimit`; the controls;
 * the key extractors and the types users write rules with, re-exported so an app needs
 * one import; and the types tollgate adds to Fastify (module augmentation): the decision
 * and the throttle's figures on the request, `app.tollgate`, a route's `config.rateLimit`
 * and the controls' opt-outs.
 *
 * @module @tollgate/fastify
 */
import type { KeyOperations, ThrottleResult } from '@tollgate/core';
import type { GroupOperations, RequestRateLimit } from '@tollgate/core/http';
import type { FastifyRequest } from 'fastify';
import type { RouteRateLimit } from './options.js';
import { tollgate } from './plugin.js';

export type { RuleChanges } from '@tollgate/core';
export * from '@tollgate/core/essentials';
export * from './controls.js';
export type { RouteRateLimit, StoreErrorPolicy, TollgateHook, TollgateOptions } from './options.js';
export { tollgate };
export default tollgate;

/**
 * What the plugin decorates the instance with beside the operations by key: `update`,
 * applied to every tollgate registration of this instance (and its child scopes) that has
 * a rule of that name (plugin-level, tier or route rule).
 * @example app.tollgate.update('pro', { limit: 10_000 })
 */
export type TollgateInstance = Pick<GroupOperations<FastifyRequest>, 'update'>;

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Operations by key without a request, over the rules of every tollgate registration
     * this instance sees (plugin-level and route-level): `get`, `reset`, `block`, `unblock`,
     * `penalize`, `reward` (docs/operations.md); and `update(ruleName, changes)`.
     * @example await app.tollgate.unblock('login', ipKey('203.0.113.7'))
     */
    tollgate: KeyOperations & TollgateInstance;
  }
  interface FastifyRequest {
    /** The rate-limit decision: every tollgate registration this request has met, combined, with `settle(actual)` for a cost known after the work (docs/reserve.md). */
    rateLimit?: RequestRateLimit;
    /** What the slow-down throttle decided for this request (hits and delay). */
    slowDown?: ThrottleResult;
  }
  interface FastifyContextConfig {
    /** Rules for this route (added to or replacing the plugin-level stack), or `false` to turn tollgate off for it. */
    rateLimit?: RouteRateLimit | false;
    /** `false` turns the slow-down throttle off for this route. */
    slowDown?: false;
    /** `false` turns the concurrency limit off for this route. */
    concurrency?: false;
    /** `false` exempts this route from load shedding (health checks). */
    shed?: false;
    /** `false` leaves this route's responses unpaced by `limitRate`. */
    limitRate?: false;
  }
}
