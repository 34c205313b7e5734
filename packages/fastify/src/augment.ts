/**
 * Types tollgate adds to Fastify through module augmentation: the decision
 * on the request, and a route's `config.rateLimit`.
 */
import type { Decision } from '@tollgate/core';
import type { RouteRateLimit } from './options.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The rate-limit decision: every tollgate registration this request has met, combined. */
    rateLimit?: Decision;
  }
  interface FastifyContextConfig {
    /**
     * Rules added to the plugin-level stack for this route, or `false` to turn every
     * tollgate registration off for it.
     * @example { config: { rateLimit: { rules: [{ name: 'login', limit: 5, window: '15m' }] } } }
     */
    rateLimit?: RouteRateLimit | false;
  }
}
