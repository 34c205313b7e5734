/**
 * `compileRule`: one rule validated, with a coded error for every problem, and turned into
 * its compiled form; the options only some algorithms take are checked against the registry.
 */
import { ALGORITHM_NAMES, type AlgorithmDef, registry, takersOf, takesOption } from './algorithms/index.js';
import { MAX_BUCKETS } from './algorithms/sliding-buckets.js';
import { parseDuration, parseRate } from './duration.js';
import { configError, describe } from './errors.js';
import type { CompiledRule, DynamicValues, Rule, ValueFn } from './rules.js';
import { closest, didYouMean, unknownOptionFix } from './suggest.js';
import type { AlgorithmName, RuleSpec } from './types.js';

const KNOWN = new Set([
  'name',
  'key',
  'limit',
  'window',
  'rate',
  'algorithm',
  'align',
  'mode',
  'queue',
  'burst',
  'buckets',
  'cost',
  'blockFor',
  'group',
  'countRejected',
  'dryRun',
  'quota',
  'per',
  'countIf',
  'actualCost',
  'skipSuccessful',
  'skipFailed',
]);
/**
 * Names people give an algorithm with its variant folded in, and what tollgate calls it:
 * the nearest of these and of the algorithms' names is suggested for an unknown algorithm.
 */
const ALGORITHM_SPELLINGS: Readonly<Record<string, string>> = Object.assign(
  {},
  ...ALGORITHM_NAMES.map((a) => registry[a].spellings),
  Object.fromEntries(ALGORITHM_NAMES.map((a) => [a, `algorithm: '${a}'`])),
);
const NAME_RE = /^[\x21\x23-\x5b\x5d-\x7e]{1,64}$/;
const DAY = 86_400_000;

function positiveInt(value: unknown, path: string, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw configError('TG_INVALID_LIMIT', {
      path,
      expected: `${what} as a positive whole number`,
      received: describe(value),
      fix: 'Use a whole number of at least 1.',
    });
  }
  return value;
}

function bool(value: unknown, path: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw configError('TG_INVALID_OPTION', { path, expected: 'true or false', received: describe(value), fix: 'Pass a boolean.' });
  }
  return value;
}

function only(cond: boolean, path: string, option: string, needs: string, found = `a rule that is not ${needs}`): void {
  if (!cond) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `${option} only on ${needs}`,
      received: `${option} on ${found}`,
      fix: `Remove ${option}, or change the rule's algorithm.`,
    });
  }
}

/** Checks a rule's shape (an object of known options) and its name; returns the name. */
function nameOf<R>(rule: Rule<R>, path: string): string {
  if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'a rule object',
      received: describe(rule),
      fix: 'Pass { name, limit, window } or { name, rate }.',
    });
  }
  for (const k of Object.keys(rule)) {
    if (!KNOWN.has(k)) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `${path}.${k}`,
        expected: `one of ${[...KNOWN].join(', ')}`,
        received: JSON.stringify(k),
        fix: unknownOptionFix(k, KNOWN),
      });
    }
  }
  const { name } = rule;
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.name`,
      expected: 'a name of 1 to 64 visible ASCII characters without quotes or backslashes',
      received: describe(name),
      fix: 'Give every rule a short name such as "user" or "login"; it appears in headers.',
    });
  }
  return name;
}

/** The rule's algorithm (a quota's default is the fixed window, else the sliding window). */
function algorithmOf<R>(rule: Rule<R>, path: string): AlgorithmName {
  // Only a missing algorithm takes the default: `null` is a mistake to report, not a default.
  const algorithm = rule.algorithm === undefined ? (rule.quota !== undefined ? 'fixed-window' : 'sliding-window') : rule.algorithm;
  if (!ALGORITHM_NAMES.includes(algorithm)) {
    const near = closest(algorithm, Object.keys(ALGORITHM_SPELLINGS));
    throw configError('TG_UNKNOWN_ALGORITHM', {
      path: `${path}.algorithm`,
      expected: `one of ${ALGORITHM_NAMES.map((a) => `"${a}"`).join(', ')}`,
      received: describe(algorithm),
      fix: `${near === undefined ? '' : `Did you mean ${ALGORITHM_SPELLINGS[near]}? `}Pick one of the ${ALGORITHM_NAMES.length} algorithms (see docs/algorithms.md).`,
    });
  }
  return algorithm;
}

interface Amount<R> {
  limit: number;
  limitFn: ValueFn<R> | undefined;
  windowMs: number;
  calendar: 'day' | 'month' | undefined;
}

/** The rule's limit and window: from `quota` and `per`, `rate`, or `limit` and `window`. */
function amountOf<R>(rule: Rule<R>, def: AlgorithmDef, path: string): Amount<R> {
  const given = ['limit', 'window', 'rate', 'quota'].filter((k) => (rule as unknown as Record<string, unknown>)[k] !== undefined);
  if (rule.quota !== undefined) {
    if (given.length !== 1 || !def.options.includes('quota')) {
      throw configError('TG_INVALID_OPTION', {
        path,
        expected: 'a quota rule with quota and per only (no limit, window, rate or other algorithm)',
        received: `${given.join(', ')} with algorithm "${def.name}"`,
        fix: 'Write a quota as { name, quota: 500000, per: "day" } and put rate limits in separate rules.',
      });
    }
    const limit = positiveInt(rule.quota, `${path}.quota`, 'quota');
    if (rule.per !== 'day' && rule.per !== 'month') {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.per`,
        expected: '"day" or "month"',
        received: describe(rule.per),
        fix: `${didYouMean(rule.per, ['day', 'month'])}Quotas follow UTC calendar days or months.`,
      });
    }
    return { limit, limitFn: undefined, windowMs: rule.per === 'day' ? DAY : 31 * DAY, calendar: rule.per };
  }
  if (rule.rate !== undefined) {
    if (rule.limit !== undefined || rule.window !== undefined) {
      throw configError('TG_INVALID_OPTION', {
        path,
        expected: 'either rate, or limit and window',
        received: 'rate together with limit or window',
        fix: 'Keep rate ("100/min") or limit + window, not both.',
      });
    }
    const { limit, windowMs } = parseRate(rule.rate, `${path}.rate`);
    return { limit, limitFn: undefined, windowMs, calendar: undefined };
  }
  if (rule.limit === undefined || rule.window === undefined) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'limit and window, or rate, or quota and per',
      received: given.length ? `only ${given.join(', ')}` : 'none of them',
      fix: 'Add { limit: 100, window: "1m" } or { rate: "100/min" }.',
    });
  }
  const windowMs = parseDuration(rule.window, `${path}.window`);
  if (typeof rule.limit === 'function') return { limit: 1, limitFn: rule.limit, windowMs, calendar: undefined };
  return { limit: positiveInt(rule.limit, `${path}.limit`, 'limit'), limitFn: undefined, windowMs, calendar: undefined };
}

/** One of two spellings of an option (`align`, `mode`), or undefined when not given. */
function oneOf<T extends string>(value: unknown, choices: readonly [T, T], path: string, what: string): T | undefined {
  if (value === undefined) return undefined;
  if (!choices.includes(value as T)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `"${choices[0]}" or "${choices[1]}"`,
      received: describe(value),
      fix: `${didYouMean(value, choices)}Pick one of the two ${what}.`,
    });
  }
  return value as T;
}

interface Shape<R> {
  align: 'clock' | 'first-request';
  mode: 'meter' | 'queue';
  burst: number;
  burstFn: ValueFn<R> | undefined;
  queue: number;
  countRejected: boolean;
}

/** The options only some algorithms take (align, mode, burst, queue, countRejected), checked against the registry. */
function shapeOf<R>(rule: Rule<R>, def: AlgorithmDef, a: Amount<R>, path: string): Shape<R> {
  const takes = (o: AlgorithmDef['options'][number]): boolean => def.options.includes(o);
  if (rule.align !== undefined) only(takes('align') && a.calendar === undefined, `${path}.align`, 'align', takersOf('align'));
  const align = oneOf(rule.align, ['clock', 'first-request'], `${path}.align`, 'alignments') ?? 'clock';
  if (rule.mode !== undefined) only(takes('mode'), `${path}.mode`, 'mode', takersOf('mode'));
  const mode = oneOf(rule.mode, ['meter', 'queue'], `${path}.mode`, 'modes') ?? 'meter';
  if (rule.queue !== undefined) only(takesOption(def, 'queue', mode), `${path}.queue`, 'queue', takersOf('queue'));
  if (rule.burst !== undefined) only(takesOption(def, 'burst', mode), `${path}.burst`, 'burst', takersOf('burst'));
  const burstFn = typeof rule.burst === 'function' ? rule.burst : undefined;
  if (def.timeState && a.limitFn !== undefined && (rule.burst !== undefined || rule.queue !== undefined)) {
    // A leaky bucket stores a time: the backlog in ms. Re-read at another rate with a
    // tolerance in ms that moved too, it could hand back budget (docs/algorithms.md).
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.${rule.burst !== undefined ? 'burst' : 'queue'}`,
      expected: 'a leaky bucket whose limit is a function to leave burst and queue to follow the limit',
      received: `${rule.burst !== undefined ? 'burst' : 'queue'} beside a function-valued limit`,
      fix: "Drop burst/queue (they then follow the limit), or use algorithm: 'token-bucket', which keeps its tokens across a change of limit and burst.",
    });
  }
  const burst = rule.burst === undefined || burstFn !== undefined ? a.limit : positiveInt(rule.burst, `${path}.burst`, 'burst');
  const queue = rule.queue === undefined ? a.limit : positiveInt(rule.queue, `${path}.queue`, 'queue');
  const countRejected = bool(rule.countRejected, `${path}.countRejected`);
  if (countRejected) {
    only(
      def.countsRefusals({ mode }),
      `${path}.countRejected`,
      'countRejected',
      'a rule that is not a leaky queue',
      'a leaky-bucket queue',
    );
  }
  return { align, mode, burst, burstFn, queue, countRejected };
}

/** The rule's cost: a whole number the rule can admit, or a function of the request. */
function costOfRule<R>(rule: Rule<R>, maxCost: number, dynamic: boolean, path: string): Pick<CompiledRule<R>, 'cost' | 'costFn'> {
  if (typeof rule.cost === 'function') return { cost: undefined, costFn: rule.cost };
  if (rule.cost === undefined) return { cost: 1, costFn: undefined };
  // With a function-valued limit or burst the largest cost is known per request: a cost
  // above it is refused then (cost_exceeds_limit).
  if (typeof rule.cost !== 'number' || !Number.isSafeInteger(rule.cost) || rule.cost <= 0 || (!dynamic && rule.cost > maxCost)) {
    throw configError('TG_INVALID_COST', {
      path: `${path}.cost`,
      expected: `a whole number from 1 to ${maxCost} (the most this rule can ever admit), or a function of the request`,
      received: describe(rule.cost),
      fix:
        typeof rule.cost === 'number' && rule.cost > maxCost
          ? 'Lower the cost or raise the limit (or burst/queue).'
          : 'Use a positive whole number.',
    });
  }
  return { cost: rule.cost, costFn: undefined };
}

/** Checks the rule's functions and group; returns its outcome filter (`countIf` with `skipSuccessful` / `skipFailed`). */
function countIfOf<R>(rule: Rule<R>, path: string): CompiledRule<R>['countIf'] {
  if (rule.key !== undefined && typeof rule.key !== 'function') {
    throw configError('TG_INVALID_KEY', {
      path: `${path}.key`,
      expected: 'a function (req) => string | undefined, such as ip(), user(fn) or constant("global")',
      received: describe(rule.key),
      fix: 'For a fixed key use constant("name").',
    });
  }
  if (rule.group !== undefined && (typeof rule.group !== 'string' || !NAME_RE.test(rule.group))) {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.group`,
      expected: 'a group name of 1 to 64 visible ASCII characters',
      received: describe(rule.group),
      fix: 'Name the shared budget, e.g. "export".',
    });
  }
  if (rule.countIf !== undefined && typeof rule.countIf !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.countIf`,
      expected: 'a function (statusCode) => boolean',
      received: describe(rule.countIf),
      fix: 'Pass a function, e.g. (status) => status < 400.',
    });
  }
  if (rule.actualCost !== undefined && typeof rule.actualCost !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.actualCost`,
      expected: 'a function (req, res) => number | Promise<number>',
      received: describe(rule.actualCost),
      fix: 'Pass a function returning the units the request used, e.g. (req, res) => res.tokensUsed.',
    });
  }
  bool(rule.skipSuccessful, `${path}.skipSuccessful`);
  bool(rule.skipFailed, `${path}.skipFailed`);
  let countIf = rule.countIf;
  if (rule.skipSuccessful || rule.skipFailed) {
    const skipOk = rule.skipSuccessful === true;
    const skipFail = rule.skipFailed === true;
    const skips = (status: number) => (status < 400 ? skipOk : skipFail);
    // Beside countIf, a request counts only when both say so: no option is silently dropped.
    const given = countIf;
    countIf = given === undefined ? (status) => !skips(status) : (status) => !skips(status) && given(status);
  }
  return countIf;
}

/**
 * Validates one rule and returns its compiled form.
 * @throws TollgateError with a stable code for every problem.
 */
export function compileRule<R>(rule: Rule<R>, prefix: string, path = 'rule'): CompiledRule<R> {
  const name = nameOf(rule, path);
  path = `${path} "${name}"`;
  const algorithm = algorithmOf(rule, path);
  const def = registry[algorithm];
  const amount = amountOf(rule, def, path);
  if (rule.per !== undefined && rule.quota === undefined) only(false, `${path}.per`, 'per', 'a quota rule');
  const { limit, limitFn, windowMs, calendar } = amount;
  const { align, mode, burst, burstFn, queue, countRejected } = shapeOf(rule, def, amount, path);
  const dryRun = bool(rule.dryRun, `${path}.dryRun`);
  const blockForMs = rule.blockFor === undefined ? 0 : parseDuration(rule.blockFor, `${path}.blockFor`);
  if (rule.buckets !== undefined) only(def.options.includes('buckets'), `${path}.buckets`, 'buckets', takersOf('buckets'));
  const buckets = def.options.includes('buckets') ? bucketsOf(rule.buckets ?? 10, windowMs, `${path}.buckets`) : 1;
  const dynamic = limitFn !== undefined || burstFn !== undefined;
  if (!dynamic && def.scaled && 2 * Math.max(limit, burst) * windowMs > Number.MAX_SAFE_INTEGER) {
    // These decide in integers scaled by W; beyond 2^53 the arithmetic would round.
    throw configError('TG_INVALID_LIMIT', {
      path: `${path}.limit`,
      expected: `a limit (and burst) times the window in ms of at most ${Math.floor(Number.MAX_SAFE_INTEGER / 2)}`,
      received: `${Math.max(limit, burst)} × ${windowMs} ms`,
      fix: 'Lower the limit or shorten the window (e.g. 1000/s instead of 86400000/d), or use a fixed-window quota.',
    });
  }
  const maxCost = def.maxCost({ limit, burst, queue, mode });
  const { cost, costFn } = costOfRule(rule, maxCost, dynamic, path);
  const countIf = countIfOf(rule, path);
  const spec: RuleSpec = {
    name,
    id: `${prefix}:${encodeURIComponent(rule.group ?? name)}:${stateKind(algorithm, windowMs, align, mode, calendar, buckets)}`,
    algorithm,
    limit,
    windowMs,
    burst,
    queue,
    buckets,
    align,
    mode,
    calendar,
    blockForMs,
    countRejected,
    dryRun,
    maxCost,
  };
  // Always the same fields (dynamic: undefined), so every compiled rule has one shape.
  if (!dynamic) return { spec, key: rule.key, cost, costFn, countIf, source: rule, dynamic: undefined };
  const values: DynamicValues<R> = {
    limit: limitFn,
    burst: burstFn,
    burstFollows: rule.burst === undefined,
    queueFollows: rule.queue === undefined,
    cache: new Map(),
    size: 0,
  };
  return { spec, key: rule.key, cost, costFn, countIf, source: rule, dynamic: values };
}

/**
 * What a rule's stored state means: its algorithm (with the leaky queue, first-request
 * alignment and calendar quotas, which read the same numbers differently) and its window.
 * Part of the rule's storage identity, so that two limiters naming a rule alike but
 * counting differently never read each other's state (`tg:ip:w60000` beside `tg:ip:f60000`;
 * sliding-buckets adds its blocks: `b60000n10`). Limit, burst, queue and cost are not: a
 * change of limit keeps the state.
 */
export function stateKind(
  algorithm: AlgorithmName,
  windowMs: number,
  align: 'clock' | 'first-request',
  mode: 'meter' | 'queue',
  calendar: 'day' | 'month' | undefined,
  buckets = 1,
): string {
  let code = registry[algorithm].code;
  if (align === 'first-request') code += 'a';
  if (mode === 'queue') code += 'q';
  if (calendar !== undefined) code += calendar === 'day' ? 'd' : 'm';
  return registry[algorithm].options.includes('buckets') ? `${code}${windowMs}n${buckets}` : `${code}${windowMs}`;
}

/**
 * A sliding-buckets rule's N: a whole number from 1 to MAX_BUCKETS that divides the window
 * in ms (blocks are whole ms, clock-aligned).
 */
function bucketsOf(n: unknown, windowMs: number, path: string): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > MAX_BUCKETS) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `buckets as a whole number from 1 to ${MAX_BUCKETS}`,
      received: describe(n),
      fix: 'Use 10 (the default) or another small count: more blocks follow the sliding log closer, each a counter per key.',
    });
  }
  if (windowMs % n !== 0) {
    let near = n;
    while (near > 1 && windowMs % near !== 0) near--;
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `a window that is a whole multiple of ${n} ms (${n} blocks of whole ms)`,
      received: `a window of ${windowMs} ms`,
      fix: `Use buckets: ${near}, or a window that ${n} divides (e.g. ${Math.ceil(windowMs / n) * n} ms).`,
    });
  }
  return n;
}
