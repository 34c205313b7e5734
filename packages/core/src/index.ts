/**
 * @tollgate/core — rules, algorithms, the stacking engine, the memory store, clocks,
 * key extraction and header formatting.
 *
 * @module @tollgate/core
 */

export type { Algorithm, AlgorithmDef, AlgorithmOption, Check, Kernel, Reading, ReadingName, State } from './algorithms/index.js';
export { ALGORITHM_CODES, ALGORITHM_NAMES, algorithms, registry, takersOf, takesOption, Verdict } from './algorithms/index.js';
export { type Clock, checkTime, ManualClock, systemClock } from './clock.js';
export {
  type ByteGrant,
  type ByteRateLimit,
  type ByteRateOptions,
  type ConcurrencyFigures,
  type ConcurrencyLimit,
  type ConcurrencyOptions,
  type ConcurrencyOutcome,
  concurrencyDecision,
  concurrencyHeaderFields,
  concurrencyRefusal,
  createByteRate,
  createConcurrency,
  createShedder,
  createThrottle,
  type LoopDelaySource,
  ManualTimers,
  MemorySlotStore,
  monitorLoopDelay,
  type Shedder,
  type ShedOptions,
  type ShedOutcome,
  type SlotGrant,
  type SlotStore,
  shedDecision,
  shedRefusal,
  systemTimers,
  type Throttle,
  type ThrottleOptions,
  type ThrottleResult,
  type TimerHandle,
  type Timers,
  throttleDecision,
} from './controls/index.js';
export {
  CHANNEL_NAMES,
  channels,
  type DecisionMessage,
  type HeldEvictionMessage,
  type InFlightMessage,
  publishDecision,
  publishInFlight,
  publishStoreError,
  type StoreErrorAction,
  type StoreErrorMessage,
} from './diagnostics.js';
export {
  DURATION_UNITS,
  type Duration,
  type DurationReading,
  type DurationString,
  type DurationUnit,
  parseDuration,
  parseRate,
  type Rate,
  type RatePeriod,
  readDuration,
} from './duration.js';
export { configError, describe as describeValue, ERROR_CODES, type ErrorCode, type ErrorDetails, TollgateError } from './errors.js';
export {
  compileHeaders,
  type HeaderContext,
  type HeaderField,
  type HeaderFormatter,
  type HeaderMode,
  type HeaderModeAlias,
  type HeaderOptions,
  type HeadersOption,
  mostRestrictive,
  parseHeaderModes,
  resetMsOf,
  windowSeconds,
} from './headers.js';
export type { ClientAddressOptions, HttpLimiterOptions } from './http-options.js';
export { applyKeyOp, keyFigures, OPERATION_ID_TTL_MS } from './key-ops.js';
export {
  compileTrust,
  constant,
  header,
  type IpOptions,
  ip,
  ipKey,
  normalizeAddress,
  type RequestLike,
  TRUST_PROXY_WARNING,
  type TrustFn,
  type TrustProxy,
  tenant,
  user,
} from './keys.js';
export { createLimiter, type Limiter, type LimiterOptions, sanitizeKey } from './limiter.js';
export { MemoryStore, type MemoryStoreOptions } from './memory-store.js';
export { mergeDecisions } from './merge.js';
export {
  type KeyOperationName,
  type KeyOperations,
  type KeyOpMessage,
  type KeyState,
  keyOperations,
  type OperationKey,
  type OperationOptions,
  type OperationSource,
  type OperationValues,
} from './operations.js';
export { ACTUAL_COST_FACTOR, actualCostMax, type Reservation } from './reserve.js';
export {
  CAPACITY_RETRY_AFTER_MS,
  capacityProblem,
  capacityRefusal,
  isCapacityRefusal,
  MESSAGE_JSON_TYPE,
  MESSAGE_TEXT_TYPE,
  PROBLEM_CONTENT_TYPE,
  PROBLEM_QUOTA_EXCEEDED,
  PROBLEM_REDUCED_CAPACITY,
  type ProblemBody,
  quotaProblem,
  type Refusal,
  refusal,
  retryAfterSeconds,
} from './response.js';
export { type CompiledRule, compileRule, compileRules, type KeyFn, type Rule, type RuleChanges, type ValueFn } from './rules.js';
export { type ByteRate, MAX_BYTES, parseByteRate, parseSize, type Size, type SizeString } from './sizes.js';
export { CHARGE_MAX, chargeState, checkRule, decideStack, type Entry, entryExpiresAt, refundEntry, settleEntry } from './stack.js';
export { closest, didYouMean, editDistance, unknownOptionFix } from './suggest.js';
export type {
  AlgorithmName,
  Decision,
  KeyOp,
  KeyOpId,
  Outcome,
  RejectReason,
  RuleResult,
  RuleSpec,
  StackPlan,
  Store,
  StoreDecision,
  StoreKeyState,
  StoreOp,
} from './types.js';
