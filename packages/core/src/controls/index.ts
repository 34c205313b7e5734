/**
 * Controls beside the limiter: throttle, concurrency limit, load shedding,
 * and what adapters need to wait on behalf of a request.
 */

export { type ByteGrant, type ByteRateLimit, type ByteRateOptions, chunkFor, createByteRate } from './byte-rate.js';
export {
  acquireWhileConnected,
  type ConcurrencyFigures,
  type ConcurrencyLimit,
  type ConcurrencyOptions,
  type ConcurrencyOutcome,
  concurrencyDecision,
  concurrencyHeaderFields,
  concurrencyRefusal,
  createConcurrency,
} from './concurrency.js';
export { type LoopDelaySource, monitorLoopDelay } from './event-loop.js';
export { hold, isGone, onceDone, type ResponseLike } from './hold.js';
export { publishControl } from './publish.js';
export { createShedder, type Shedder, type ShedOptions, type ShedOutcome, shedDecision, shedRefusal } from './shed.js';
export { MemorySlotStore, type SlotGrant, type SlotStore } from './slot-store.js';
export { createThrottle, type Throttle, type ThrottleOptions, type ThrottleResult, throttleDecision } from './throttle.js';
export { ManualTimers, systemTimers, type TimerHandle, type Timers } from './timers.js';
