/**
 * A limiter's rules as it holds them: the family that `update` changes (a limiter and
 * every limiter made from it), tiers, and the rules `extend` adds.
 */
import { guardAppFn } from './app-errors.js';
import { configError, describe } from './errors.js';
import type { Limiter } from './limiter.js';
import type { Cell, Tiering } from './limiter-ops.js';
import { type CompiledRule, compileChanges, compileRules, type KeyFn, type Rule, type RuleChanges } from './rules.js';
import { didYouMean } from './suggest.js';

/**
 * The rules of a limiter and of every limiter made from it (`extend`, and an adapter's
 * route stacks), by name: what `update` changes and operations by rule name look up.
 */
export interface RuleFamily<R> {
  readonly prefix: string;
  readonly byName: Map<string, Cell<R>[]>;
  /** Counts updates, so a view of the rules is rebuilt only after one. */
  version: number;
}

/** A family for limiters that should be updated together (an adapter's app and route stacks). */
export function ruleFamily<R>(prefix = 'tg'): RuleFamily<R> {
  return { prefix, byName: new Map(), version: 0 };
}

export const families = new WeakMap<object, RuleFamily<unknown>>();

/**
 * The rule named `name` among a limiter's rules, its tiers' and those of the limiters
 * made from it, as it is now (after any `update`); `undefined` when there is none.
 */
export function ruleByName<R>(limiter: Limiter<R>, name: string): CompiledRule<R> | undefined {
  const family = families.get(limiter) as RuleFamily<R> | undefined;
  return family?.byName.get(name)?.[0]?.c;
}

/**
 * Replaces `changes` of every rule named `name` in `family`, validated as at construction,
 * all or none. The next decisions use the new values; the state is kept (same identity).
 */
export function updateRule<R>(family: RuleFamily<R>, name: string, changes: RuleChanges<R>): void {
  const cells = typeof name === 'string' ? family.byName.get(name) : undefined;
  if (cells === undefined) {
    const names = [...family.byName.keys()];
    throw configError('TG_UNKNOWN_RULE', {
      path: 'update',
      expected: `the name of one of this limiter's rules (${names.map((n) => JSON.stringify(n)).join(', ')})`,
      received: describe(name),
      fix: `${didYouMean(name, names)}Name a rule as it is declared (its \`name\`).`,
    });
  }
  const guarded: RuleChanges<R> = typeof changes === 'object' && changes !== null ? { ...changes } : changes;
  if (typeof guarded === 'object' && guarded !== null) {
    if (typeof guarded.limit === 'function') guarded.limit = guardAppFn(guarded.limit);
    if (typeof guarded.burst === 'function') guarded.burst = guardAppFn(guarded.burst);
    if (typeof guarded.cost === 'function') guarded.cost = guardAppFn(guarded.cost);
  }
  const next = cells.map((cell) => compileChanges(cell.c, guarded, family.prefix, 'update'));
  for (const [i, cell] of cells.entries()) cell.c = next[i] as CompiledRule<R>;
  family.version++;
}

export function cellOf<R>(c: CompiledRule<R>, defaultKey: KeyFn<R>, family: RuleFamily<R>): Cell<R> {
  const cell: Cell<R> = { c, key: c.key ?? defaultKey, lastRaw: undefined, lastKey: '', lastOp: undefined };
  const list = family.byName.get(c.spec.name);
  if (list === undefined) family.byName.set(c.spec.name, [cell]);
  else list.push(cell);
  return cell;
}

const TIER_NAME = /^[\x21-\x7e]{1,64}$/;

/** Validates `tiers` and `tier` (both or neither) and compiles every tier's rules. */
export function compileTiers<R>(tiers: unknown, tier: unknown, prefix: string): Map<string, CompiledRule<R>[]> | undefined {
  if (tiers === undefined && tier === undefined) return undefined;
  if (tiers === undefined || typeof tiers !== 'object' || tiers === null || Array.isArray(tiers) || Object.keys(tiers).length === 0) {
    throw configError('TG_INVALID_OPTION', {
      path: 'tiers',
      expected: 'an object of named rule stacks, e.g. { free: [...], pro: [...] }, beside tier',
      received: tiers === undefined ? 'tier without tiers' : describe(tiers),
      fix: "Pass tiers: { free: [{ name: 'free', rate: '100/min' }], pro: [{ name: 'pro', rate: '5000/min' }] } and tier: (req) => req.user?.plan ?? 'free'.",
    });
  }
  if (typeof tier !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: 'tier',
      expected: 'a function (req) => the name of a tier (or a promise of one)',
      received: tier === undefined ? 'tiers without tier' : describe(tier),
      fix: "Pass tier: (req) => req.user?.plan ?? 'free'.",
    });
  }
  const out = new Map<string, CompiledRule<R>[]>();
  for (const [name, stack] of Object.entries(tiers as Record<string, unknown>)) {
    if (!TIER_NAME.test(name)) {
      throw configError('TG_INVALID_OPTION', {
        path: 'tiers',
        expected: 'tier names of 1 to 64 visible ASCII characters',
        received: JSON.stringify(name),
        fix: 'Name each tier after its plan, e.g. "free" or "pro".',
      });
    }
    // An empty tier adds no rule of its own (the base rules still apply).
    const path = `tiers.${name}`;
    out.set(name, Array.isArray(stack) && stack.length === 0 ? [] : compileRules(stack as readonly Rule<R>[], prefix, path));
  }
  return out;
}

/** The rules `extend` adds to a stack, validated against the stack's and its tiers' names. */
export function extendRules<R>(
  cells: readonly Cell<R>[],
  tiering: Tiering<R> | undefined,
  rules: readonly Rule<R>[],
  prefix: string,
): CompiledRule<R>[] {
  const added = compileRules(rules, prefix, 'route rules');
  const names = new Set(cells.map((c) => c.c.spec.name));
  const tierOf = new Map<string, string>();
  for (const [tier, stack] of tiering?.stacks ?? []) for (const c of stack) tierOf.set(c.c.spec.name, tier);
  for (const [i, c] of added.entries()) {
    const tier = tierOf.get(c.spec.name);
    if (names.has(c.spec.name) || tier !== undefined) {
      throw configError('TG_DUPLICATE_RULE', {
        path: `route rules[${i}].name`,
        expected: `route rule names that differ from the app-level rule names${tier === undefined ? '' : ' and those of its tiers'}`,
        received:
          tier === undefined ? JSON.stringify(c.spec.name) : `${JSON.stringify(c.spec.name)}, a rule of tier ${JSON.stringify(tier)}`,
        fix: 'Rename the route rule; it adds to the app-level stack rather than replacing it.',
      });
    }
  }
  return added;
}

/** Every rule a limiter holds, in the order a request's ops come: its base rules, then each tier's. */
export function everyCell<R>(cells: readonly Cell<R>[], tiering: Tiering<R> | undefined): Cell<R>[] {
  return tiering === undefined ? cells.slice() : [...cells, ...[...tiering.stacks.values()].flat()];
}

/** The rule named `name` among a limiter's rules and its tiers', as it is now (after any update). */
export function ownRule<R>(cells: readonly Cell<R>[], tiering: Tiering<R> | undefined, name: string): CompiledRule<R> | undefined {
  for (const c of everyCell(cells, tiering)) if (c.c.spec.name === name) return c.c;
  return undefined;
}

/** What a limiter's `rules` and `tiers` show, rebuilt after an update. */
export function ruleViews<R>(
  cells: readonly Cell<R>[],
  tiering: Tiering<R> | undefined,
  family: RuleFamily<R>,
): (which: 'rules' | 'tiers') => unknown {
  let seen = -1;
  let rulesView: CompiledRule<R>[] = [];
  let tiersView: Record<string, CompiledRule<R>[]> | undefined;
  return (which) => {
    if (seen !== family.version) {
      seen = family.version;
      rulesView = cells.map((c) => c.c);
      tiersView =
        tiering === undefined ? undefined : Object.fromEntries([...tiering.stacks].map(([name, stack]) => [name, stack.map((c) => c.c)]));
    }
    return which === 'rules' ? rulesView : tiersView;
  };
}
