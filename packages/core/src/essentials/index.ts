/**
 * @tollgate/core/essentials — what an application writes rules with, re-exported as it is
 * by every adapter (`@tollgate/express`, `@tollgate/fastify`, `@tollgate/node`) so that an
 * app needs one import: the key extractors, the in-memory store and manual clock, and the
 * types of rules, decisions and options. Listed once here; each adapter re-exports it all.
 */
export {
  constant,
  type Decision,
  type HeaderMode,
  type HeadersOption,
  header,
  ip,
  ManualClock,
  MemoryStore,
  type Rule,
  type RuleResult,
  type Store,
  type TrustProxy,
  tenant,
  user,
} from '../index.js';
