/**
 * The slow-down throttle, framework-agnostic.
 *
 * `hits` is the number of arrivals from a key within the last `window`, this one
 * included, counted when the request arrives. Counting goes through the ordinary
 * `Store` interface as a `sliding-log` rule, so the count is exact and the throttle
 * works on every store (memory, Redis) without store code of its own. A hit is never
 * refunded and a delayed request is counted once.
 *
 * Bound: the log's limit is `maxHits` (default `delayAfter + 1000`, far past the point
 * where common delays reach `maxDelay`). Up to it `hits` is exact. An arrival that finds
 * `maxHits` arrivals in the window saturates the key: the rule refuses it and blocks the
 * key for one window (`blockFor`), during which every arrival counts as `maxHits + 1`
 * and nothing more is logged; after that the key is counted afresh. So a key holds at
 * most `maxHits` (time, count) pairs (same-millisecond arrivals are merged), each
 * decision costs O(maxHits) at worst however hard one key floods, and the store's
 * `maxKeys` bounds the number of keys.
 *
 * The delay is `delay(hits)` once `hits > delayAfter`, clamped to `[0, maxDelay]`;
 * waiting is the adapter's job (see `hold`), one timer per request, no queue.
 */
import { callbackResultError, guardAppFn, markAppError, skipOf } from '../app-errors.js';
import type { Clock } from '../clock.js';
import type { Duration } from '../duration.js';
import { configError, describe } from '../errors.js';
import { createLimiter } from '../limiter.js';
import type { KeyFn } from '../rules.js';
import type { Decision, RuleResult, Store } from '../types.js';
import { boundedDuration, checkOptions, MAX_TIMER_MS, optionalFn, wholeNumber } from './options.js';

export interface ThrottleOptions<R = unknown> {
  /**
   * How far back arrivals are counted.
   * @example '10s'
   */
  window: Duration;
  /**
   * Arrivals per window that pass without delay; the next ones are delayed.
   * @example 2
   */
  delayAfter: number;
  /**
   * The delay in ms of a request once `hits > delayAfter`: a fixed number, or a
   * function of the hits (this one included) and the request.
   * @default (hits) => (hits - delayAfter) * 1000
   * @example (hits) => hits * hits * 1000
   */
  delay?: number | ((hits: number, req: R) => number | Promise<number>);
  /**
   * Upper bound of any delay. Finite so that a runaway client cannot park a request
   * (and its socket) for ever; a minute is already longer than most proxies wait.
   * @default 60_000 (at most 2^31-1 ms)
   */
  maxDelay?: Duration;
  /**
   * What to count under.
   * @default ip()
   */
  key?: KeyFn<R>;
  /**
   * Requests for which this returns true are neither counted nor delayed.
   * @example (req) => req.url === '/health'
   */
  skip?: (req: R) => boolean | Promise<boolean>;
  /**
   * The policy name in headers.
   * @default 'slow-down'
   */
  name?: string;
  /**
   * Where arrivals are logged (share one store across instances to throttle as one).
   * @default new MemoryStore()
   */
  store?: Store;
  /** Time source; when omitted the store's own clock decides (Redis: `TIME`). */
  clock?: Clock;
  /**
   * Namespace of the store keys, kept apart from the limiter's `tg` by default.
   * @default 'tg-sd'
   */
  prefix?: string;
  /**
   * Arrivals per window counted exactly; beyond, the key is saturated for one window
   * (see the module comment). Raise it if your `delay` keeps growing past
   * `delayAfter + 1000` hits before it reaches `maxDelay`.
   * @default delayAfter + 1000
   */
  maxHits?: number;
  /** The key of a throttle that names none (adapters pass their trusted-proxy aware `ip()`). */
  defaultKey?: KeyFn<R>;
}

/** What the throttle decided for one arrival. */
export interface ThrottleResult {
  /** Arrivals from this key within the window, this one included (`maxHits + 1` when saturated). */
  hits: number;
  /** The key passed `maxHits` arrivals in a window and counts as saturated (see `maxHits`). */
  saturated: boolean;
  /** How long the request must wait before it proceeds (0: not delayed). */
  delayMs: number;
  /**
   * The throttle's own figures in the shape header formatters take: `limit` is
   * `delayAfter`, `remaining` the arrivals left before delays start, `resetMs` the
   * time until every arrival counted so far has left the window.
   */
  result: RuleResult;
}

export interface Throttle<R = unknown> {
  readonly name: string;
  readonly windowMs: number;
  readonly delayAfter: number;
  readonly maxDelayMs: number;
  readonly store: Store;
  /** Counts an arrival and returns its delay; `undefined` when skipped or the key is absent. */
  hit(req: R): Promise<ThrottleResult | undefined>;
  /** Forgets the request key's arrivals. */
  reset(req: R): Promise<void>;
  /** Closes the store if the throttle created it (a store passed in stays open). */
  close(): Promise<void>;
}

const KNOWN = [
  'window',
  'delayAfter',
  'delay',
  'maxDelay',
  'maxHits',
  'key',
  'skip',
  'name',
  'store',
  'clock',
  'prefix',
  'defaultKey',
] as const;
const DEFAULT_MAX_DELAY = 60_000;

/**
 * Creates a throttle.
 * @example
 * const throttle = createThrottle({ window: '10s', delayAfter: 2, delay: 5000 });
 * const t = await throttle.hit(req); // t.delayMs: 0, 0, 5000, 5000, ...
 */
export function createThrottle<R = unknown>(options: ThrottleOptions<R>): Throttle<R> {
  checkOptions(options, KNOWN, 'slowDown');
  const o = options as ThrottleOptions<R>;
  const path = 'slowDown';
  const windowMs = boundedDuration(o.window, `${path}.window`, Number.MAX_SAFE_INTEGER);
  const delayAfter = wholeNumber(o.delayAfter, `${path}.delayAfter`, 0);
  const maxDelayMs = o.maxDelay === undefined ? DEFAULT_MAX_DELAY : boundedDuration(o.maxDelay, `${path}.maxDelay`, MAX_TIMER_MS);
  const rawSkip = optionalFn<(req: R) => unknown>(o.skip, `${path}.skip`, '(req) => boolean');
  // The app's callbacks: what they throw or reject with is the app's error, never a store failure.
  const skip = rawSkip === undefined ? undefined : guardAppFn(rawSkip);
  const maxHits = o.maxHits === undefined ? delayAfter + 1000 : wholeNumber(o.maxHits, `${path}.maxHits`, 1);
  if (maxHits <= delayAfter) {
    throw configError('TG_INVALID_LIMIT', {
      path: `${path}.maxHits`,
      expected: `a whole number above delayAfter (${delayAfter})`,
      received: describe(maxHits),
      fix: 'Leave maxHits out (default delayAfter + 1000), or raise it.',
    });
  }
  let delayFn: (hits: number, req: R) => unknown;
  if (o.delay === undefined) delayFn = (hits) => (hits - delayAfter) * 1000;
  else if (typeof o.delay === 'function') delayFn = guardAppFn(o.delay);
  else if (typeof o.delay === 'number' && Number.isFinite(o.delay) && o.delay >= 0) {
    const fixed = o.delay;
    delayFn = () => fixed;
  } else {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.delay`,
      expected: 'a number of ms >= 0, or a function (hits, req) => ms',
      received: describe(o.delay),
      fix: 'Pass e.g. delay: 500 or delay: (hits) => hits * 100.',
    });
  }
  const name = o.name ?? 'slow-down';
  const limiter = createLimiter<R>({
    rules: [
      {
        name,
        ...(o.key !== undefined ? { key: typeof o.key === 'function' ? guardAppFn(o.key) : o.key } : {}),
        limit: maxHits,
        window: windowMs,
        algorithm: 'sliding-log',
        blockFor: windowMs,
      },
    ],
    prefix: o.prefix ?? 'tg-sd',
    ...(o.store !== undefined ? { store: o.store } : {}),
    ...(o.clock !== undefined ? { clock: o.clock } : {}),
    ...(o.defaultKey !== undefined ? { defaultKey: o.defaultKey } : {}),
  });

  function clamp(ms: unknown): number {
    if (typeof ms !== 'number') {
      throw callbackResultError(`${path}.delay`, 'a number of ms (or a promise of one)', ms, 'Return the delay in milliseconds.');
    }
    // A delay of NaN throttles as hard as allowed rather than not at all.
    if (Number.isNaN(ms)) return maxDelayMs;
    return Math.min(maxDelayMs, Math.max(0, Math.ceil(ms)));
  }

  const skipped = (req: R): Promise<boolean> => skipOf(skip, path, req);

  async function delayOf(hits: number, req: R): Promise<number> {
    let v: unknown;
    try {
      v = await delayFn(hits, req);
    } catch (err) {
      throw markAppError(err);
    }
    return clamp(v);
  }

  return {
    name,
    windowMs,
    delayAfter,
    maxDelayMs,
    store: limiter.store,
    async hit(req) {
      if (await skipped(req)) return undefined;
      const d = await limiter.consume(req);
      const r = d.rules[0];
      if (r === undefined) return undefined;
      // Refused by the log (it is full, or the key is blocked as saturated): over maxHits.
      const saturated = !r.allowed;
      const hits = saturated ? maxHits + 1 : r.limit - r.remaining;
      const delayMs = hits > delayAfter ? await delayOf(hits, req) : 0;
      return {
        hits,
        saturated,
        delayMs,
        result: {
          name,
          allowed: true,
          limit: delayAfter,
          remaining: Math.max(0, delayAfter - hits),
          windowMs,
          resetMs: r.resetMs,
          retryAfterMs: 0,
          delayMs,
        },
      };
    },
    reset: (req) => limiter.reset(req),
    close: () => (o.store === undefined ? limiter.store.close() : Promise.resolve()),
  };
}

/**
 * A throttle result as a `Decision` (for diagnostics): always admitted, delayed by
 * `delayMs`, with the throttle's figures as its one rule.
 */
export function throttleDecision(t: ThrottleResult, at: number): Decision {
  return {
    allowed: true,
    delayMs: t.delayMs,
    retryAfterMs: 0,
    rejectedBy: [],
    dryRunRejectedBy: [],
    rules: [t.result],
    at,
  };
}
