/**
 * Rules: the user-facing shape, and `compileRules`, which validates a stack
 * once and turns it into what the engine and stores use on every request.
 */
import { type Duration, parseDuration, parseRate, type Rate } from './duration.js';
import { configError, describe, TollgateError } from './errors.js';
import { closest, didYouMean, unknownOptionFix } from './suggest.js';
import type { AlgorithmName, RuleSpec } from './types.js';

/**
 * A key function: the string a rule counts under, or `undefined`/`null` to not apply; or
 * a promise of one (awaited; a plain value keeps the decision synchronous).
 */
export type KeyFn<R> = (req: R) => string | number | undefined | null | Promise<string | number | undefined | null>;

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
  /** Units admitted per `window` (with `window`), or use `rate`. */
  limit?: number;
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
  /** token-bucket / leaky-bucket meter capacity. @default limit */
  burst?: number;
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
}

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
  'cost',
  'blockFor',
  'group',
  'countRejected',
  'dryRun',
  'quota',
  'per',
  'countIf',
  'skipSuccessful',
  'skipFailed',
]);
const ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket'];
/**
 * Names people give an algorithm with its variant folded in, and what tollgate calls it:
 * the nearest of these and of ALGORITHMS is suggested for an unknown algorithm.
 */
const ALGORITHM_SPELLINGS: Readonly<Record<string, string>> = {
  'leaky-queue': "algorithm: 'leaky-bucket', mode: 'queue'",
  'leaky-bucket-queue': "algorithm: 'leaky-bucket', mode: 'queue'",
  'leaky-meter': "algorithm: 'leaky-bucket', mode: 'meter'",
  'leaky-bucket-meter': "algorithm: 'leaky-bucket', mode: 'meter'",
  gcra: "algorithm: 'leaky-bucket', mode: 'meter'",
  'fixed-window-first-request': "algorithm: 'fixed-window', align: 'first-request'",
  'sliding-window-log': "algorithm: 'sliding-log'",
  'sliding-window-counter': "algorithm: 'sliding-window'",
  ...Object.fromEntries(ALGORITHMS.map((a) => [a, `algorithm: '${a}'`])),
};
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

function only(cond: boolean, path: string, option: string, needs: string): void {
  if (!cond) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: `${option} only on ${needs}`,
      received: `${option} on a rule that is not ${needs}`,
      fix: `Remove ${option}, or change the rule's algorithm.`,
    });
  }
}

/**
 * Validates one rule and returns its compiled form.
 * @throws TollgateError with a stable code for every problem.
 */
export function compileRule<R>(rule: Rule<R>, prefix: string, path = 'rule'): CompiledRule<R> {
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
  path = `${path} "${name}"`;

  // Only a missing algorithm takes the default: `null` is a mistake to report, not a default.
  const algorithm = rule.algorithm === undefined ? (rule.quota !== undefined ? 'fixed-window' : 'sliding-window') : rule.algorithm;
  if (!ALGORITHMS.includes(algorithm)) {
    const near = closest(algorithm, Object.keys(ALGORITHM_SPELLINGS));
    throw configError('TG_UNKNOWN_ALGORITHM', {
      path: `${path}.algorithm`,
      expected: `one of ${ALGORITHMS.map((a) => `"${a}"`).join(', ')}`,
      received: describe(algorithm),
      fix: `${near === undefined ? '' : `Did you mean ${ALGORITHM_SPELLINGS[near]}? `}Pick one of the five algorithms (see docs/algorithms.md).`,
    });
  }

  let limit: number;
  let windowMs: number;
  let calendar: 'day' | 'month' | undefined;
  const given = ['limit', 'window', 'rate', 'quota'].filter((k) => (rule as unknown as Record<string, unknown>)[k] !== undefined);
  if (rule.quota !== undefined) {
    if (given.length !== 1 || algorithm !== 'fixed-window') {
      throw configError('TG_INVALID_OPTION', {
        path,
        expected: 'a quota rule with quota and per only (no limit, window, rate or other algorithm)',
        received: `${given.join(', ')} with algorithm "${algorithm}"`,
        fix: 'Write a quota as { name, quota: 500000, per: "day" } and put rate limits in separate rules.',
      });
    }
    limit = positiveInt(rule.quota, `${path}.quota`, 'quota');
    if (rule.per !== 'day' && rule.per !== 'month') {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.per`,
        expected: '"day" or "month"',
        received: describe(rule.per),
        fix: `${didYouMean(rule.per, ['day', 'month'])}Quotas follow UTC calendar days or months.`,
      });
    }
    calendar = rule.per;
    windowMs = calendar === 'day' ? DAY : 31 * DAY;
  } else if (rule.rate !== undefined) {
    if (rule.limit !== undefined || rule.window !== undefined) {
      throw configError('TG_INVALID_OPTION', {
        path,
        expected: 'either rate, or limit and window',
        received: 'rate together with limit or window',
        fix: 'Keep rate ("100/min") or limit + window, not both.',
      });
    }
    ({ limit, windowMs } = parseRate(rule.rate, `${path}.rate`));
  } else {
    if (rule.limit === undefined || rule.window === undefined) {
      throw configError('TG_INVALID_OPTION', {
        path,
        expected: 'limit and window, or rate, or quota and per',
        received: given.length ? `only ${given.join(', ')}` : 'none of them',
        fix: 'Add { limit: 100, window: "1m" } or { rate: "100/min" }.',
      });
    }
    limit = positiveInt(rule.limit, `${path}.limit`, 'limit');
    windowMs = parseDuration(rule.window, `${path}.window`);
  }
  if (rule.per !== undefined && rule.quota === undefined) only(false, `${path}.per`, 'per', 'a quota rule');

  const isLeaky = algorithm === 'leaky-bucket';
  const isBucket = algorithm === 'token-bucket' || isLeaky;
  if (rule.align !== undefined) {
    only(algorithm === 'fixed-window' && calendar === undefined, `${path}.align`, 'align', 'a fixed-window rule');
    if (rule.align !== 'clock' && rule.align !== 'first-request') {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.align`,
        expected: '"clock" or "first-request"',
        received: describe(rule.align),
        fix: `${didYouMean(rule.align, ['clock', 'first-request'])}Pick one of the two alignments.`,
      });
    }
  }
  if (rule.mode !== undefined) {
    only(isLeaky, `${path}.mode`, 'mode', 'a leaky-bucket rule');
    if (rule.mode !== 'meter' && rule.mode !== 'queue') {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}.mode`,
        expected: '"meter" or "queue"',
        received: describe(rule.mode),
        fix: `${didYouMean(rule.mode, ['meter', 'queue'])}Pick one of the two modes.`,
      });
    }
  }
  const mode = rule.mode ?? 'meter';
  if (rule.queue !== undefined) only(isLeaky && mode === 'queue', `${path}.queue`, 'queue', "a leaky-bucket rule with mode 'queue'");
  if (rule.burst !== undefined) only(isBucket && mode === 'meter', `${path}.burst`, 'burst', 'a token-bucket or leaky-bucket meter rule');
  const burst = rule.burst === undefined ? limit : positiveInt(rule.burst, `${path}.burst`, 'burst');
  const queue = rule.queue === undefined ? limit : positiveInt(rule.queue, `${path}.queue`, 'queue');
  const countRejected = bool(rule.countRejected, `${path}.countRejected`);
  if (countRejected) only(!(isLeaky && mode === 'queue'), `${path}.countRejected`, 'countRejected', 'a rule that is not a leaky queue');
  const dryRun = bool(rule.dryRun, `${path}.dryRun`);
  bool(rule.skipSuccessful, `${path}.skipSuccessful`);
  bool(rule.skipFailed, `${path}.skipFailed`);
  const blockForMs = rule.blockFor === undefined ? 0 : parseDuration(rule.blockFor, `${path}.blockFor`);

  if ((algorithm === 'token-bucket' || algorithm === 'sliding-window') && 2 * Math.max(limit, burst) * windowMs > Number.MAX_SAFE_INTEGER) {
    // These two decide in integers scaled by W; beyond 2^53 the arithmetic would round.
    throw configError('TG_INVALID_LIMIT', {
      path: `${path}.limit`,
      expected: `a limit (and burst) times the window in ms of at most ${Math.floor(Number.MAX_SAFE_INTEGER / 2)}`,
      received: `${Math.max(limit, burst)} × ${windowMs} ms`,
      fix: 'Lower the limit or shorten the window (e.g. 1000/s instead of 86400000/d), or use a fixed-window quota.',
    });
  }
  const maxCost = isBucket ? (mode === 'queue' ? queue : burst) : limit;
  let cost: number | undefined = 1;
  let costFn: ((req: R) => number | Promise<number>) | undefined;
  if (typeof rule.cost === 'function') {
    cost = undefined;
    costFn = rule.cost;
  } else if (rule.cost !== undefined) {
    if (typeof rule.cost !== 'number' || !Number.isSafeInteger(rule.cost) || rule.cost <= 0 || rule.cost > maxCost) {
      throw configError('TG_INVALID_COST', {
        path: `${path}.cost`,
        expected: `a whole number from 1 to ${maxCost} (the most this rule can ever admit), or a function of the request`,
        received: describe(rule.cost),
        fix:
          rule.cost !== undefined && typeof rule.cost === 'number' && rule.cost > maxCost
            ? 'Lower the cost or raise the limit (or burst/queue).'
            : 'Use a positive whole number.',
      });
    }
    cost = rule.cost;
  }
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
  let countIf = rule.countIf;
  if (rule.skipSuccessful || rule.skipFailed) {
    const skipOk = rule.skipSuccessful === true;
    const skipFail = rule.skipFailed === true;
    const skips = (status: number) => (status < 400 ? skipOk : skipFail);
    // Beside countIf, a request counts only when both say so: no option is silently dropped.
    const given = countIf;
    countIf = given === undefined ? (status) => !skips(status) : (status) => !skips(status) && given(status);
  }

  const spec: RuleSpec = {
    name,
    id: `${prefix}:${encodeURIComponent(rule.group ?? name)}:${stateKind(algorithm, windowMs, rule.align ?? 'clock', mode, calendar)}`,
    algorithm,
    limit,
    windowMs,
    burst,
    queue,
    align: rule.align ?? 'clock',
    mode,
    calendar,
    blockForMs,
    countRejected,
    dryRun,
    maxCost,
  };
  return { spec, key: rule.key, cost, costFn, countIf, source: rule };
}

const KIND_CODE: Record<AlgorithmName, string> = {
  'fixed-window': 'f',
  'sliding-log': 's',
  'sliding-window': 'w',
  'token-bucket': 't',
  'leaky-bucket': 'k',
};

/**
 * What a rule's stored state means: its algorithm (with the leaky queue, first-request
 * alignment and calendar quotas, which read the same numbers differently) and its window.
 * Part of the rule's storage identity, so that two limiters naming a rule alike but
 * counting differently never read each other's state (`tg:ip:w60000` beside `tg:ip:f60000`).
 * Limit, burst, queue and cost are not: a change of limit keeps the state.
 */
export function stateKind(
  algorithm: AlgorithmName,
  windowMs: number,
  align: 'clock' | 'first-request',
  mode: 'meter' | 'queue',
  calendar: 'day' | 'month' | undefined,
): string {
  let code = KIND_CODE[algorithm];
  if (align === 'first-request') code += 'a';
  if (mode === 'queue') code += 'q';
  if (calendar !== undefined) code += calendar === 'day' ? 'd' : 'm';
  return `${code}${windowMs}`;
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
    const group = rule.group;
    if (group !== undefined) {
      // A group is one budget: its rules must count alike (else each kind is a budget of its own).
      const kind = groups.get(group);
      const own = compiled.spec.id.slice(compiled.spec.id.lastIndexOf(':') + 1);
      if (kind !== undefined && kind !== own) {
        throw configError('TG_INVALID_OPTION', {
          path: `${path}[${i}].group`,
          expected: `the rules of group ${JSON.stringify(group)} to share one algorithm and window`,
          received: `${own} beside ${kind}`,
          fix: 'Give the rules of a group the same algorithm and window (limits may differ), or use two groups.',
        });
      }
      groups.set(group, own);
    }
    return compiled;
  });
}

export { TollgateError };
