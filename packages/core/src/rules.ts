/**
 * Rules: the user-facing shape, and `compileRules`, which validates a stack
 * once and turns it into what the engine and stores use on every request.
 */
import { registry } from './algorithms/index.js';
import { callbackResultError } from './app-errors.js';
import { type Duration, parseRate, type Rate } from './duration.js';
import { configError, describe, TollgateError } from './errors.js';
import { compileRule, stateKind } from './rule-compile.js';
import { unknownOptionFix } from './suggest.js';
import type { AlgorithmName, RuleSpec } from './types.js';

/**
 * A key function: the string a rule counts under, or `undefined`/`null` to not apply; or
 * a promise of one (awaited; a plain value keeps the decision synchronous).
 */
export type KeyFn<R> = (req: R) => string | number | undefined | null | Promise<string | number | undefined | null>;

/**
 * A rule's value per request: a number, or a function of the request returning one or a
 * promise of one (awaited only when it is a promise). Checked on every request: anything
 * but a positive whole number is a coded error, never an admission.
 */
export type ValueFn<R> = (req: R) => number | Promise<number>;

/**
 * One limit.
 * @example { name: 'user', key: user((req) => req.user?.id), rate: '100/min' }
 * @example { name: 'login', limit: 5, window: '15m', algorithm: 'fixed-window', blockFor: '1h' }
 */
export interface Rule<R = unknown> {
  /** Unique within a stack; the policy name in headers, metrics and problem bodies. */
  name: string;
  /** What to count under. @default ip() */
  key?: KeyFn<R>;
  /**
   * Units admitted per `window` (with `window`), or use `rate`. A function of the request
   * picks the limit per request (the caller's plan); the rule's state is kept when it changes.
   */
  limit?: number | ValueFn<R>;
  window?: Duration;
  /** Shorthand for limit and window: `'100/min'`, `'10/sec'`, `'5/15m'`, `'100/hour'`, `'5 per minute'`. */
  rate?: Rate;
  /** @default 'sliding-window' */
  algorithm?: AlgorithmName;
  /** fixed-window only. @default 'clock' */
  align?: 'clock' | 'first-request';
  /** leaky-bucket only. @default 'meter' */
  mode?: 'meter' | 'queue';
  /** leaky-bucket queue: places in the queue. @default limit */
  queue?: number;
  /**
   * sliding-buckets only: the blocks the window is cut into, each `window / buckets` ms (the
   * window must be a whole multiple of that many ms). At most 1000. @default 10
   */
  buckets?: number;
  /** token-bucket / leaky-bucket meter capacity, or a function of the request. @default limit */
  burst?: number | ValueFn<R>;
  /** Units a request consumes: a number or a function of the request. @default 1 */
  cost?: number | ((req: R) => number | Promise<number>);
  /** Once rejected by this rule, a key stays rejected this long. */
  blockFor?: Duration;
  /** Rules naming the same group share one counter. */
  group?: string;
  /** Count rejected requests too (a penalty: retrying while refused pushes recovery back). @default false */
  countRejected?: boolean;
  /** Decide and report, but never refuse. @default false */
  dryRun?: boolean;
  /** A calendar quota: units per UTC day or month (with `per`). */
  quota?: number;
  per?: 'day' | 'month';
  /**
   * Count only responses whose status passes (adapters; decided after the response, as a
   * refund). With `skipSuccessful` / `skipFailed` too, a request counts only if all agree.
   */
  countIf?: (statusCode: number) => boolean;
  /**
   * The request's actual cost, known once the response has finished (adapters): the rule's
   * `cost` is then an estimate, reserved when the request is admitted and settled with this
   * value when the response finishes (a streamed one: when its stream ends; an aborted one
   * keeps the estimate). `res` is the response as the adapter's handlers see it (Express
   * and node: Node's response; Fastify: the reply; Koa: the context; Hono: the context).
   * @example actualCost: (req, res) => (res as { tokensSent: number }).tokensSent
   */
  actualCost?: (req: R, res: unknown) => number | Promise<number>;
  /** Refund requests that end with a status below 400 (adapters). @default false */
  skipSuccessful?: boolean;
  /** Refund requests that end with a status of 400 or more (adapters). @default false */
  skipFailed?: boolean;
}

/** A rule after validation: the store-facing spec plus the request-facing functions. */
export interface CompiledRule<R = unknown> {
  readonly spec: RuleSpec;
  /** `undefined` means the default key (the limiter's `ip()`). */
  readonly key: KeyFn<R> | undefined;
  /** Static cost, or `undefined` when `costFn` decides per request. */
  readonly cost: number | undefined;
  readonly costFn: ((req: R) => number | Promise<number>) | undefined;
  /** Outcome filter for adapters: `true` means the request counts. Undefined: always counts. */
  readonly countIf: ((statusCode: number) => boolean) | undefined;
  readonly source: Rule<R>;
  /**
   * Set when `limit` or `burst` is a function of the request: each decision then uses a
   * spec derived from `spec` with the values it returned (`specFor` in rules.ts), whose
   * identity (`id`) is `spec.id`. `spec.limit` (and `burst`, `queue`, `maxCost`) are then
   * only the construction-time placeholders (1 for a function-valued limit).
   */
  readonly dynamic?: DynamicValues<R> | undefined;
}

/** The function-valued parts of a rule, and the specs derived from their values. */
export interface DynamicValues<R> {
  readonly limit: ValueFn<R> | undefined;
  readonly burst: ValueFn<R> | undefined;
  /** Whether burst (token/leaky meter) and queue (leaky queue) follow the limit per request. */
  readonly burstFollows: boolean;
  readonly queueFollows: boolean;
  /** Derived specs by limit, then burst: one object per pair, so stores' caches keyed by spec hold. */
  readonly cache: Map<number, Map<number, RuleSpec>>;
  size: number;
}

/** The most derived specs a rule keeps (emptied when full: values come from the app, maybe from clients). */
const DERIVED_MAX = 256;

function requestValue(v: unknown, name: string, what: 'limit' | 'burst'): number {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) return v;
  throw callbackResultError(
    `rules.${name}.${what}`,
    `the ${what} as a positive whole number (or a promise of one)`,
    v,
    `Return the ${what} that applies to this request, e.g. from the caller's plan; map unknown plans to a default.`,
  );
}

/**
 * The spec a dynamic rule decides with for the values its functions returned (`limit`,
 * `burst`: raw results, checked here; `undefined` for a value that is not a function).
 * Same identity as the rule's own spec, so the state survives a change of value. Cached
 * per (limit, burst): a value seen before costs two map reads and allocates nothing.
 * @throws TG_INVALID_CALLBACK_RESULT for a value that is not a positive whole number, or
 *   a limit (and burst) too large for the algorithm's exact arithmetic.
 */
export function specFor<R>(rule: CompiledRule<R>, limit: unknown, burst: unknown): RuleSpec {
  const d = rule.dynamic as DynamicValues<R>;
  const base = rule.spec;
  const L = d.limit === undefined ? base.limit : requestValue(limit, base.name, 'limit');
  const B = d.burst !== undefined ? requestValue(burst, base.name, 'burst') : d.burstFollows ? L : base.burst;
  let byBurst = d.cache.get(L);
  const hit = byBurst?.get(B);
  if (hit !== undefined) return hit;
  const def = registry[base.algorithm];
  if (def.scaled && 2 * Math.max(L, B) * base.windowMs > Number.MAX_SAFE_INTEGER) {
    throw callbackResultError(
      `rules.${base.name}.limit`,
      `a limit (and burst) times the window in ms of at most ${Math.floor(Number.MAX_SAFE_INTEGER / 2)}`,
      Math.max(L, B),
      'Return a smaller limit, or shorten the window.',
    );
  }
  const Q = d.queueFollows ? L : base.queue;
  const spec: RuleSpec = { ...base, limit: L, burst: B, queue: Q, maxCost: def.maxCost({ limit: L, burst: B, queue: Q, mode: base.mode }) };
  if (d.size >= DERIVED_MAX) {
    d.cache.clear();
    d.size = 0;
    byBurst = undefined;
  }
  if (byBurst === undefined) {
    byBurst = new Map();
    d.cache.set(L, byBurst);
  }
  byBurst.set(B, spec);
  d.size++;
  return spec;
}

/** Validates a whole stack: every rule, and names unique across it. */
export function compileRules<R>(rules: readonly Rule<R>[], prefix: string, path = 'rules'): CompiledRule<R>[] {
  if (!Array.isArray(rules) || rules.length === 0) {
    throw configError('TG_NO_RULES', {
      path,
      expected: 'a non-empty array of rules',
      received: describe(rules),
      fix: 'Pass rules: [{ name: "ip", rate: "100/min" }].',
    });
  }
  const seen = new Set<string>();
  const groups = new Map<string, string>();
  return rules.map((rule, i) => {
    const compiled = compileRule(rule, prefix, `${path}[${i}]`);
    if (seen.has(compiled.spec.name)) {
      throw configError('TG_DUPLICATE_RULE', {
        path: `${path}[${i}].name`,
        expected: 'rule names that are unique within the stack',
        received: `a second rule named ${JSON.stringify(compiled.spec.name)}`,
        fix: 'Rename one of them; use `group` if two routes should share a budget.',
      });
    }
    seen.add(compiled.spec.name);
    checkGroup(groups, compiled, `${path}[${i}].group`);
    return compiled;
  });
}

/**
 * A group is one budget, so its rules must count alike (else each kind would be a budget of
 * its own): fails when `c`'s group already holds rules of another kind (algorithm and
 * window, the end of the storage id); records the kind otherwise.
 */
function checkGroup<R>(groups: Map<string, string>, c: CompiledRule<R>, path: string): void {
  const group = c.source.group;
  if (group === undefined) return;
  const own = c.spec.id.slice(c.spec.id.lastIndexOf(':') + 1);
  const kind = groups.get(group);
  if (kind !== undefined && kind !== own) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `the rules of group ${JSON.stringify(group)} to share one algorithm and window`,
      received: `${own} beside ${kind}`,
      fix: 'Give the rules of a group the same algorithm and window (limits may differ), or use two groups.',
    });
  }
  groups.set(group, own);
}

export { compileRule, stateKind, TollgateError };

/** The rules of several stacks held by one limiter (its base rules, its tiers, its routes' rules). */
export interface NamedStack<R> {
  /** The stack's error path, e.g. `rules` or `tiers.pro`. */
  readonly path: string;
  readonly compiled: readonly CompiledRule<R>[];
}

/**
 * Fails unless every rule name is unique across `stacks` (and the names of `taken`) and
 * the rules of a group count alike across them: tiers and routes stack with the base
 * rules, and an operation by rule name must find one rule.
 */
export function checkAcross<R>(stacks: readonly NamedStack<R>[], taken: ReadonlyMap<string, string> = new Map()): void {
  const seen = new Map(taken);
  const groups = new Map<string, string>();
  for (const { path, compiled } of stacks) {
    for (const [i, c] of compiled.entries()) {
      const where = seen.get(c.spec.name);
      if (where !== undefined) {
        throw configError('TG_DUPLICATE_RULE', {
          path: `${path}[${i}].name`,
          expected: 'rule names that are unique across the rules, every tier and the route rules of a limiter',
          received: `${JSON.stringify(c.spec.name)}, already a rule of ${where}`,
          fix: 'Rename one of them; give both the same `group` if they should share one budget (e.g. one per plan).',
        });
      }
      seen.set(c.spec.name, path);
      checkGroup(groups, c, `${path}[${i}].group`);
    }
  }
}

/** What `limiter.update(ruleName, changes)` may replace. */
export interface RuleChanges<R = unknown> {
  limit?: number | ValueFn<R>;
  burst?: number | ValueFn<R>;
  cost?: number | ((req: R) => number | Promise<number>);
  blockFor?: Duration;
}

const CHANGEABLE = ['limit', 'burst', 'cost', 'blockFor'] as const;

/**
 * Validates `changes` against `current` and returns the rule compiled with them, exactly as
 * construction would: same name, algorithm, window and group, so the same storage identity.
 * `limit` of a `rate` rule replaces the rate's count (its period stays), of a quota its quota.
 */
export function compileChanges<R>(current: CompiledRule<R>, changes: RuleChanges<R>, prefix: string, path: string): CompiledRule<R> {
  if (typeof changes !== 'object' || changes === null || Array.isArray(changes)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'an object of changes { limit?, burst?, cost?, blockFor? }',
      received: describe(changes),
      fix: "Pass e.g. limiter.update('user', { limit: 5000 }).",
    });
  }
  const keys = Object.keys(changes);
  for (const k of keys) {
    if (!(CHANGEABLE as readonly string[]).includes(k)) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `${path}.${k}`,
        expected: `one of ${CHANGEABLE.join(', ')}`,
        received: JSON.stringify(k),
        fix: unknownOptionFix(
          k,
          CHANGEABLE,
          'A rule keeps its name, key, algorithm and window (its identity) for life; only these four change in place.',
        ),
      });
    }
  }
  if (keys.length === 0) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'at least one of limit, burst, cost or blockFor',
      received: 'an empty object',
      fix: 'Pass the values to change, e.g. { limit: 5000 }.',
    });
  }
  const src = current.source;
  const next: Rule<R> = { ...src };
  if (changes.limit !== undefined) {
    if (src.quota !== undefined) {
      if (typeof changes.limit === 'function') {
        throw configError('TG_INVALID_OPTION', {
          path: `${path}.limit`,
          expected: 'a number for a quota rule',
          received: 'a function',
          fix: 'A quota rule takes a new quota as a number.',
        });
      }
      next.quota = changes.limit;
    } else {
      if (src.rate !== undefined) {
        next.window = parseRate(src.rate, `${path}.rate`).windowMs;
        delete next.rate;
      }
      next.limit = changes.limit;
    }
  }
  if (changes.burst !== undefined) next.burst = changes.burst;
  if (changes.cost !== undefined) next.cost = changes.cost;
  if (changes.blockFor !== undefined) next.blockFor = changes.blockFor;
  if (registry[current.spec.algorithm].timeState && changes.limit !== undefined && (next.burst !== undefined || next.queue !== undefined)) {
    // See compileRule: a change of rate is safe on a leaky bucket only while its tolerance in
    // time (burst / limit × window) stays the window, i.e. while burst follows the limit.
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.limit`,
      expected: "a leaky bucket's limit to change only while its burst follows the limit",
      received: 'a new limit for a leaky bucket with its own burst',
      fix: "Change the burst alone, or use algorithm: 'token-bucket' for limits that change.",
    });
  }
  return compileRule(next, prefix, path);
}
