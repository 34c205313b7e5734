/**
 * @tollgate/redis — `RedisStore` on ioredis, iovalkey or node-redis (standalone, Sentinel,
 * Cluster): a Redis function library (or, where functions are missing, Lua scripts) that
 * mirrors every core algorithm, Redis time, and a failure policy.
 *
 * @module @tollgate/redis
 */
export type { BreakerOptions, BreakerState } from './breaker.js';
export { REDIS_CHANNEL_NAMES, redisChannels } from './channels.js';
export type { RedisWarningMessage } from './checks.js';
export { RedisSlotStore, type RedisSlotStoreOptions, SLOT_SCRIPT, SLOT_SCRIPT_SHA, type SlotClientLike } from './concurrency.js';
export { REDIS_WARNINGS, type RedisWarningCode } from './errors.js';
export type { StoreErrorPolicy } from './fallback.js';
export { STORE_LIBRARY, STORE_LIBRARY_NAME, STORE_SCRIPT, STORE_SCRIPT_SHA } from './lua/index.js';
export { type BreakerEvent, RedisStore, type RedisStoreOptions, type StoreErrorEvent } from './redis-store.js';
export type { RedisClientLike } from './script.js';
