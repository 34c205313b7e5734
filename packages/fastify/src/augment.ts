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
    /** Rules for this route (added to or replacing the plugin-level stack), or `false` to turn tollgate off for it. */
    rateLimit?: RouteRateLimit | false;
  }
}
