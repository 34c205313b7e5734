/**
 * Combining the decisions of several limiters met by one request: an
 * app-level limiter and a route-level one, or any limiters stacked in a middleware
 * chain. Adapters expose the combination as `req.rateLimit`, so handlers see every
 * rule that applied, and single-value headers pick the most restrictive among them.
 */
import type { Decision } from './types.js';

/**
 * The decision of `earlier` and `later` taken together: admitted only if both were,
 * rules in the order they were met, the longer delay and (for a refusal) the later
 * decision's retry time; a store's `degraded` mark survives. Neither input is modified.
 */
export function mergeDecisions(earlier: Decision | undefined, later: Decision): Decision {
  if (earlier === undefined) return later;
  const allowed = earlier.allowed && later.allowed;
  const degraded = later.degraded ?? earlier.degraded;
  return {
    ...(degraded !== undefined ? { degraded } : {}),
    allowed,
    delayMs: allowed ? Math.max(earlier.delayMs, later.delayMs) : 0,
    retryAfterMs: allowed ? 0 : Math.max(earlier.allowed ? 0 : earlier.retryAfterMs, later.allowed ? 0 : later.retryAfterMs),
    rejectedBy: [...earlier.rejectedBy, ...later.rejectedBy],
    dryRunRejectedBy: [...earlier.dryRunRejectedBy, ...later.dryRunRejectedBy],
    rules: [...earlier.rules, ...later.rules],
    at: later.at,
  };
}
