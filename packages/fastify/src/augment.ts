/**
 * Types tollgate adds to Fastify through module augmentation: the decision
 * on the request, and a route's `config.rateLimit`.
 */
import type { Decision, KeyOperations } from '@tollgate/core';
import type { RouteRateLimit } from './options.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Operations by key without a request, over the rules of every tollgate registration
     * this instance sees (plugin-level and route-level): `get`, `reset`, `block`, `unblock`,
     * `penalize`, `reward` (docs/operations.md).
     * @example await app.tollgate.unblock('login', ipKey('203.0.113.7'))
     */
    tollgate: KeyOperations;
  }
  interface FastifyRequest {
    /** The rate-limit decision: every tollgate registration this request has met, combined. */
    rateLimit?: Decision;
  }
  interface FastifyContextConfig {
    /** Rules for this route (added to or replacing the plugin-level stack), or `false` to turn tollgate off for it. */
    rateLimit?: RouteRateLimit | false;
  }
}
