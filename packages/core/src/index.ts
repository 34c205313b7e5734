/**
 * @tollgate/core — rules, algorithms, the stacking engine, the memory store, clocks,
 * key extraction and header formatting.
 */

export type { Algorithm, Check, State } from './algorithms/index.js';
export { algorithms } from './algorithms/index.js';
export { type Clock, ManualClock, systemClock } from './clock.js';
export { type Duration, parseDuration, parseRate } from './duration.js';
export { ERROR_CODES, type ErrorCode, TollgateError } from './errors.js';
export { constant, ip, normalizeAddress, type RequestLike } from './keys.js';
export { createLimiter, type Limiter, type LimiterOptions, sanitizeKey } from './limiter.js';
export { MemoryStore, type MemoryStoreOptions } from './memory-store.js';
export { type CompiledRule, compileRule, compileRules, type KeyFn, type Rule } from './rules.js';
export { checkRule, decideStack, type Entry, entryExpiresAt, refundEntry } from './stack.js';
export type {
  AlgorithmName,
  Decision,
  Outcome,
  RejectReason,
  RuleResult,
  RuleSpec,
  Store,
  StoreDecision,
  StoreOp,
} from './types.js';
