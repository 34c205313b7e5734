/**
 * The app-level limiter options of a scenario app (scenarios.ts, AppSpec), the same for
 * every adapter: the spec's rules, store and clock, and each optional setting it names.
 */
import type { AppSpec } from './scenarios.js';

/** `spec`'s app-level options, typed loosely: each adapter's request type is its own. */
// biome-ignore lint/suspicious/noExplicitAny: handed to each adapter's own options type
export function limiterOptions(spec: AppSpec): any {
  return {
    rules: spec.rules,
    store: spec.store,
    clock: spec.clock,
    ...(spec.trustProxy !== undefined ? { trustProxy: spec.trustProxy } : {}),
    ...(spec.headers !== undefined ? { headers: spec.headers } : {}),
    ...(spec.dryRun !== undefined ? { dryRun: spec.dryRun } : {}),
    ...(spec.tiers !== undefined ? { tiers: spec.tiers, tier: spec.tier } : {}),
    ...(spec.allow !== undefined ? { allow: spec.allow } : {}),
    ...(spec.deny !== undefined ? { deny: spec.deny } : {}),
    ...(spec.options as object),
  };
}
