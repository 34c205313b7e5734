/**
 * The rules of a limiter's stacks, for operations by key, and the tiers' rules guarded as
 * the app-level ones are.
 */
import { guardRules } from '../app-errors.js';
import type { Clock } from '../clock.js';
import { configError } from '../errors.js';
import { type Limiter, ruleByName } from '../limiter.js';
import type { OperationSource } from '../operations.js';
import type { CompiledRule, Rule } from '../rules.js';
import type { RuleSpec, Store } from '../types.js';

/** Every tier's rules with their functions guarded (see guardRules); other values as they are, for the limiter to report. */
export function guardTiers<Req>(tiers: unknown): Readonly<Record<string, readonly Rule<Req>[]>> | undefined {
  if (typeof tiers !== 'object' || tiers === null || Array.isArray(tiers)) return tiers as undefined;
  return Object.fromEntries(Object.entries(tiers).map(([name, stack]) => [name, guardRules(stack as Rule<Req>[], `tiers.${name}`)]));
}

/**
 * The rules of a limiter's stacks by name, for operations by key: the app-level rules and
 * each route stack's as it is built. Two route rules of one name that count differently
 * (another algorithm or window, so another state) make the name ambiguous: an operation
 * on it is refused rather than guessing which state was meant.
 */
export function ruleRegistry<Req>(store: Store, clock: Clock | undefined): OperationSource & { learn(lim: Limiter<Req>): void } {
  // Each name's first rule and a limiter that holds it: the spec is read from the limiter at
  // each operation, so an operation sees the rule as it is after an update (the identity,
  // which decides ambiguity, never changes).
  const byName = new Map<string, { spec: RuleSpec; rule: CompiledRule<Req>; lim: Limiter<Req> }>();
  const ambiguous = new Set<string>();
  return {
    store,
    clock,
    learn(lim) {
      for (const c of [...lim.rules, ...Object.values(lim.tiers ?? {}).flat()]) {
        const known = byName.get(c.spec.name);
        if (known === undefined) byName.set(c.spec.name, { spec: c.spec, rule: c, lim });
        else if (known.spec.id !== c.spec.id) ambiguous.add(c.spec.name);
      }
    },
    ruleByName(name) {
      if (ambiguous.has(name)) {
        throw configError('TG_UNKNOWN_RULE', {
          path: 'rule',
          expected: 'a rule name that names one state',
          received: `${JSON.stringify(name)}, the name of route rules with different algorithms or windows`,
          fix: 'Give those route rules different names to operate on their keys.',
        });
      }
      const known = byName.get(name);
      return known === undefined ? undefined : ((ruleByName(known.lim, name) ?? known.rule) as CompiledRule<never>);
    },
    ruleNames: () => byName.keys(),
  };
}
