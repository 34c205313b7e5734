/**
 * Rules: the user-facing shape, and `compileRules`, which validates a stack
 * once and turns it into what the engine and stores use on every request.
 */

import { MAX_BUCKETS } from './algorithms/sliding-buckets.js';
import { callbackResultError } from './app-errors.js';
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
  if (
    (base.algorithm === 'token-bucket' || base.algorithm === 'sliding-window') &&
    2 * Math.max(L, B) * base.windowMs > Number.MAX_SAFE_INTEGER
  ) {
    throw callbackResultError(
      `rules.${base.name}.limit`,
      `a limit (and burst) times the window in ms of at most ${Math.floor(Number.MAX_SAFE_INTEGER / 2)}`,
      Math.max(L, B),
      'Return a smaller limit, or shorten the window.',
    );
  }
  const Q = d.queueFollows ? L : base.queue;
  const isBucket = base.algorithm === 'token-bucket' || base.algorithm === 'leaky-bucket';
  const spec: RuleSpec = { ...base, limit: L, burst: B, queue: Q, maxCost: isBucket ? (base.mode === 'queue' ? Q : B) : L };
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
const ALGORITHMS: readonly AlgorithmName[] = [
  'fixed-window',
  'sliding-log',
  'sliding-window',
  'token-bucket',
  'leaky-bucket',
  'sliding-buckets',
];
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
  'sliding-window-buckets': "algorithm: 'sliding-buckets'",
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
      fix: `${near === undefined ? '' : `Did you mean ${ALGORITHM_SPELLINGS[near]}? `}Pick one of the six algorithms (see docs/algorithms.md).`,
    });
  }

  let limit: number;
  let limitFn: ValueFn<R> | undefined;
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
    if (typeof rule.limit === 'function') {
      limitFn = rule.limit;
      limit = 1;
    } else limit = positiveInt(rule.limit, `${path}.limit`, 'limit');
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
  const burstFn = typeof rule.burst === 'function' ? rule.burst : undefined;
  if (isLeaky && limitFn !== undefined && (rule.burst !== undefined || rule.queue !== undefined)) {
    // A leaky bucket stores a time: the backlog in ms. Re-read at another rate with a
    // tolerance in ms that moved too, it could hand back budget (docs/algorithms.md).
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.${rule.burst !== undefined ? 'burst' : 'queue'}`,
      expected: 'a leaky bucket whose limit is a function to leave burst and queue to follow the limit',
      received: `${rule.burst !== undefined ? 'burst' : 'queue'} beside a function-valued limit`,
      fix: "Drop burst/queue (they then follow the limit), or use algorithm: 'token-bucket', which keeps its tokens across a change of limit and burst.",
    });
  }
  const burst = rule.burst === undefined || burstFn !== undefined ? limit : positiveInt(rule.burst, `${path}.burst`, 'burst');
  const queue = rule.queue === undefined ? limit : positiveInt(rule.queue, `${path}.queue`, 'queue');
  const countRejected = bool(rule.countRejected, `${path}.countRejected`);
  if (countRejected)
    only(
      !(isLeaky && mode === 'queue'),
      `${path}.countRejected`,
      'countRejected',
      'a rule that is not a leaky queue',
      'a leaky-bucket queue',
    );
  const dryRun = bool(rule.dryRun, `${path}.dryRun`);
  bool(rule.skipSuccessful, `${path}.skipSuccessful`);
  bool(rule.skipFailed, `${path}.skipFailed`);
  const blockForMs = rule.blockFor === undefined ? 0 : parseDuration(rule.blockFor, `${path}.blockFor`);
  if (rule.buckets !== undefined) only(algorithm === 'sliding-buckets', `${path}.buckets`, 'buckets', 'a sliding-buckets rule');
  const buckets = algorithm === 'sliding-buckets' ? bucketsOf(rule.buckets ?? 10, windowMs, `${path}.buckets`) : 1;

  const dynamic = limitFn !== undefined || burstFn !== undefined;
  if (
    !dynamic &&
    (algorithm === 'token-bucket' || algorithm === 'sliding-window') &&
    2 * Math.max(limit, burst) * windowMs > Number.MAX_SAFE_INTEGER
  ) {
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
    // With a function-valued limit or burst the largest cost is known per request: a cost
    // above it is refused then (cost_exceeds_limit).
    if (typeof rule.cost !== 'number' || !Number.isSafeInteger(rule.cost) || rule.cost <= 0 || (!dynamic && rule.cost > maxCost)) {
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
  if (rule.actualCost !== undefined && typeof rule.actualCost !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.actualCost`,
      expected: 'a function (req, res) => number | Promise<number>',
      received: describe(rule.actualCost),
      fix: 'Pass a function returning the units the request used, e.g. (req, res) => res.tokensUsed.',
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
    id: `${prefix}:${encodeURIComponent(rule.group ?? name)}:${stateKind(algorithm, windowMs, rule.align ?? 'clock', mode, calendar, buckets)}`,
    algorithm,
    limit,
    windowMs,
    burst,
    queue,
    buckets,
    align: rule.align ?? 'clock',
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

const KIND_CODE: Record<AlgorithmName, string> = {
  'fixed-window': 'f',
  'sliding-log': 's',
  'sliding-window': 'w',
  'token-bucket': 't',
  'leaky-bucket': 'k',
  'sliding-buckets': 'b',
};

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
  let code = KIND_CODE[algorithm];
  if (align === 'first-request') code += 'a';
  if (mode === 'queue') code += 'q';
  if (calendar !== undefined) code += calendar === 'day' ? 'd' : 'm';
  return algorithm === 'sliding-buckets' ? `${code}${windowMs}n${buckets}` : `${code}${windowMs}`;
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

export { TollgateError };

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
  if (current.spec.algorithm === 'leaky-bucket' && changes.limit !== undefined && (next.burst !== undefined || next.queue !== undefined)) {
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
