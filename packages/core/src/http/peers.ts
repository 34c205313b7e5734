/**
 * Option names of the peers users migrate from, with what replaces each in tollgate
 * (docs/migrating.md has the whole map): adapters turn an unknown option that a peer
 * knows into a pointed hint instead of a bare "unknown option".
 */

/** express-rate-limit option names (v6 to v8) that tollgate spells differently. */
export const EXPRESS_RATE_LIMIT_OPTIONS: Readonly<Record<string, string>> = {
  windowMs: "a rule's window: rules: [{ name: 'ip', limit: 100, window: '15m' }], or rate: '100/15m' for both",
  limit: "a rule's limit: rules: [{ name: 'ip', limit: 100, window: '15m' }], or rate: '100/15m' for both",
  max: "a rule's limit: rules: [{ name: 'ip', limit: 100, window: '15m' }], or rate: '100/15m' for both",
  keyGenerator: "a rule's key: rules: [{ name: 'ip', rate: '100/min', key: (req) => ... }]",
  identifier: "a rule's name: rules: [{ name: 'api', rate: '100/min' }]",
  standardHeaders: "headers: 'draft-10' (the default), 'draft-7' or 'draft-6'",
  legacyHeaders: "headers: ['draft-10', 'legacy']",
  skipFailedRequests: "skipFailed: true on a rule: rules: [{ name: 'ip', rate: '100/min', skipFailed: true }]",
  skipSuccessfulRequests: "skipSuccessful: true on a rule: rules: [{ name: 'login', limit: 5, window: '15m', skipSuccessful: true }]",
  requestWasSuccessful: 'countIf: (statusCode) => boolean on a rule',
  requestPropertyName: 'req.rateLimit, which is always there (remove the option)',
  retryAfter: 'nothing: Retry-After is computed from the algorithm (remove the option)',
  validate: 'nothing: every option is always validated (remove the option)',
  logger: 'the tollgate:* diagnostics channels',
  onLimitReached: 'onRejected',
};

/** @fastify/rate-limit option names. */
export const FASTIFY_RATE_LIMIT_OPTIONS: Readonly<Record<string, string>> = {
  max: "a rule's limit: rules: [{ name: 'ip', limit: 100, window: '1m' }]",
  timeWindow: "a rule's window: rules: [{ name: 'ip', limit: 100, window: '1m' }]",
  keyGenerator: "a rule's key: rules: [{ name: 'ip', rate: '100/min', key: (req) => ... }]",
  groupId: "a rule's group: rules: [{ name: 'export', group: 'export', ... }]",
  global: 'rules: [] (only routes with config.rateLimit.rules are limited)',
  allowList: "allow: ['10.0.0.0/8'] for client addresses, or skip: (request) => boolean",
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

/** @nestjs/throttler option names (`ThrottlerModule.forRoot`), for `TollgateModule.forRoot`. */
export const NESTJS_THROTTLER_OPTIONS: Readonly<Record<string, string>> = {
  throttlers: "one rule per throttler: rules: [{ name: 'short', limit: 3, window: '1s', algorithm: 'sliding-log' }, ...]",
  ttl: "a rule's window: rules: [{ name: 'default', limit: 10, window: '1m', algorithm: 'sliding-log' }]",
  limit: "a rule's limit: rules: [{ name: 'default', limit: 10, window: '1m', algorithm: 'sliding-log' }]",
  blockDuration: "a rule's blockFor",
  getTracker: "a rule's key: rules: [{ name: 'default', rate: '10/min', key: (req) => ... }]",
  generateKey: "a rule's key (tollgate builds the stored key from the rule's name and the key)",
  skipIf: 'skip: (req) => boolean, or @SkipRateLimit()',
  ignoreUserAgents: "skip: (req) => /bot/i.test(req.headers['user-agent'] ?? '')",
  storage: 'store: new RedisStore({ client })',
  errorMessage: 'message',
  setHeaders: 'headers (false for none)',
};

/**
 * The hint for an option name that `peer` has (from a table like the one above), for an
 * adapter's "unknown option" errors; undefined for a name the peer does not have.
 * @example peerHint('@fastify/rate-limit', FASTIFY_RATE_LIMIT_OPTIONS)('max')
 */
export function peerHint(peer: string, table: Readonly<Record<string, string>>): (name: string) => string | undefined {
  return (name) => {
    const use = Object.hasOwn(table, name) ? table[name] : undefined;
    return use === undefined ? undefined : `That is an ${peer} option; use ${use} (docs/migrating.md maps every option).`;
  };
}
