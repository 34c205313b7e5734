/**
 * @tollgate/core/essentials — what an application writes rules with, re-exported as it is
 * by every adapter (`@tollgate/express`, `@tollgate/fastify`, `@tollgate/node`) so that an
 * app needs one import: the key extractors, the in-memory store and manual clock, and the
 * types of rules, decisions and options. Listed once here; each adapter re-exports it all.
 * (From the defining modules, not from core's root entry, so that the build keeps that
 * entry whole.)
 */
export { ManualClock } from '../clock.js';
export type { HeaderMode, HeadersOption } from '../headers.js';
export type { RequestRateLimit } from '../http/settle.js';
export { constant, header, ip, ipKey, type TrustProxy, tenant, user } from '../keys.js';
export { MemoryStore } from '../memory-store.js';
export type { KeyState } from '../operations.js';
export type { Rule } from '../rules.js';
export type { Decision, RuleResult, Store } from '../types.js';
