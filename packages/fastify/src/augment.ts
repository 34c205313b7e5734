/**
 * Types tollgate adds to Fastify through module augmentation: the decision and the
 * throttle's figures on the request; a route's `config.rateLimit` and the controls' opt-outs.
 */
import type { Decision, KeyOperations, RuleChanges, ThrottleResult } from '@tollgate/core';
import type { FastifyRequest } from 'fastify';
import type { RouteRateLimit } from './options.js';

/** What the plugin decorates the instance with: `app.tollgate`. */
export interface TollgateInstance {
  /**
   * Replaces a rule's `limit`, `burst`, `cost` or `blockFor` in place, in every tollgate
   * registration of this instance (and its child scopes) that has a rule of that name
   * (plugin-level, tier or route rule), validated as at construction; the next decisions
   * use it and the rule's state is kept. Per process: apply it on every instance.
   * @throws TG_UNKNOWN_RULE when no registration has the rule.
   * @example app.tollgate.update('pro', { limit: 10_000 })
   */
  update(ruleName: string, changes: RuleChanges<FastifyRequest>): void;
}

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
    /** The rate-limit decision: every tollgate registration this request has met, combined. */
    rateLimit?: Decision;
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
  }
}
