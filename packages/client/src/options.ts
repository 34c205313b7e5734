/**
 * `createFetch` options: their documentation, defaults and validation.
 * Everything is checked once, at construction; the per-request path only reads the
 * normalised result.
 */
import { type Clock, describeValue, type Rate, type Rule, systemClock, unknownOptionFix } from '@tollgate/core';
import type { Jitter } from './backoff.js';
import { clientConfigError } from './errors.js';
import { realSleep, type Sleep } from './sleep.js';

/** What a pacing rule's `key` and `cost` functions receive. */
export interface PaceRequest {
  /** The request URL. */
  url: URL;
  /** Upper-case method. */
  method: string;
  /** The request's scope (`scope` option; the origin by default). */
  scope: string;
}

/** Why a retry happens. */
export type RetryReason = 'status' | 'network' | 'timeout';

/** Passed to `onRetry` before each retry's wait. */
export interface RetryEvent {
  /** The retry number: 1 for the first retry. */
  retry: number;
  /** The attempt about to be made after the wait: 2 for the first retry. */
  attempt: number;
  /** How long the client now waits before that attempt, in ms. */
  waitMs: number;
  reason: RetryReason;
  /** The status that caused the retry (reason `status`). */
  status?: number;
  /** What the server asked for (Retry-After or a RateLimit policy at r=0), in ms. */
  serverWaitMs?: number;
  /** The error that caused the retry (reasons `network` and `timeout`). */
  error?: unknown;
  url: string;
  method: string;
}

/** Passed to `onWait` when a request is held back before it is sent. */
export interface WaitEvent {
  /** `ratelimit`: the origin reported a policy at r=0 or sent Retry-After; `pace`: the pacing rule. */
  reason: 'ratelimit' | 'pace';
  waitMs: number;
  scope: string;
  url: string;
  method: string;
}

/** Why the client stopped retrying and handed back the last response or error. */
export type GiveUpReason = 'not-retryable' | 'attempts' | 'max-wait' | 'deadline';

/** Passed to `onGiveUp` when a retryable outcome (429, 503, network error, timeout) is handed back. */
export interface GiveUpEvent {
  reason: GiveUpReason;
  /** Attempts made. */
  attempts: number;
  status?: number;
  error?: unknown;
  url: string;
  method: string;
}

export interface CreateFetchOptions {
  /**
   * The fetch to wrap: Node's global fetch, undici's, or any fetch-compatible function.
   * @default globalThis.fetch (looked up at call time)
   */
  fetch?: typeof fetch;
  /**
   * Retries after the first attempt. The default allows 5 attempts in all.
   * @default 4
   * @example createFetch({ retries: 2 }) // at most 3 attempts
   */
  retries?: number;
  /**
   * Backoff base: retry n waits random(0, min(capMs, baseMs · 2^(n-1))).
   * @default 500
   */
  baseMs?: number;
  /**
   * Backoff cap, in ms.
   * @default 10000
   */
  capMs?: number;
  /**
   * `'full'` (AWS "full jitter") or `'none'` (no randomness; synchronised retries, for
   * comparisons).
   * @default 'full'
   */
  jitter?: Jitter;
  /**
   * The longest single wait the server may ask for (Retry-After, or a RateLimit policy at
   * r=0). A longer Retry-After ends the retries (the response is returned); a longer r=0
   * hint is ignored. `Infinity` removes the cap.
   * @default 60000
   */
  maxWaitMs?: number;
  /**
   * Total time budget of one call, in ms, from the call to the last attempt's start.
   * No wait that would end past it is started.
   * @example createFetch({ deadlineMs: 30_000 })
   */
  deadlineMs?: number;
  /**
   * Per-attempt timeout in ms: an attempt without response headers by then is aborted
   * and counts as a failure (retried if the request is safe to retry).
   * @example createFetch({ timeoutMs: 5_000 })
   */
  timeoutMs?: number;
  /**
   * Statuses that are retried.
   * @default [429, 503]
   */
  statuses?: readonly number[];
  /**
   * Give POST and PATCH requests without an `Idempotency-Key` header a generated one
   * (`true`: a random UUID; or your own generator), which makes them retryable. The key is
   * the same on every attempt of one call.
   * @default false
   * @example createFetch({ idempotencyKey: true })
   */
  idempotencyKey?: boolean | (() => string);
  /**
   * Self-pacing: a core rule applied before each attempt is sent. A string is a rate
   * (`'10/s'`) paced evenly (leaky-bucket meter with burst 1); a rule (or a stack of rules)
   * may use any algorithm. The rule's key defaults to the request's scope.
   * @example createFetch({ pace: '50/s' })
   * @example createFetch({ pace: { name: 'api', rate: '100/min', algorithm: 'sliding-log' } })
   */
  pace?: Rate | Rule<PaceRequest> | readonly Rule<PaceRequest>[];
  /**
   * What pacing and RateLimit holds are counted under.
   * @default (url) => url.origin
   */
  scope?: (url: URL, method: string) => string;
  /**
   * A number in [0, 1), for jitter.
   * @default Math.random
   */
  random?: () => number;
  /**
   * Time source (ms). Give a `sleep` that follows the same clock.
   * @default systemClock
   */
  clock?: Clock;
  /**
   * How the client waits. Tests pass a virtual scheduler's sleep.
   * @default setTimeout-based, abortable
   */
  sleep?: Sleep;
  /** Called before each retry's wait. */
  onRetry?: (event: RetryEvent) => void;
  /** Called when a request is held back before being sent (pacing or an origin's r=0). */
  onWait?: (event: WaitEvent) => void;
  /** Called when a retryable outcome is handed back without a further retry. */
  onGiveUp?: (event: GiveUpEvent) => void;
}

export interface NormalizedOptions {
  fetch: typeof fetch | undefined;
  retries: number;
  baseMs: number;
  capMs: number;
  jitter: Jitter;
  maxWaitMs: number;
  deadlineMs: number | undefined;
  timeoutMs: number | undefined;
  statuses: ReadonlySet<number>;
  idempotencyKey: (() => string) | undefined;
  pace: readonly Rule<PaceRequest>[] | undefined;
  scope: (url: URL, method: string) => string;
  random: () => number;
  clock: Clock;
  sleep: Sleep;
  onRetry: ((e: RetryEvent) => void) | undefined;
  onWait: ((e: WaitEvent) => void) | undefined;
  onGiveUp: ((e: GiveUpEvent) => void) | undefined;
}

const KNOWN = [
  'fetch',
  'retries',
  'baseMs',
  'capMs',
  'jitter',
  'maxWaitMs',
  'deadlineMs',
  'timeoutMs',
  'statuses',
  'idempotencyKey',
  'pace',
  'scope',
  'random',
  'clock',
  'sleep',
  'onRetry',
  'onWait',
  'onGiveUp',
] as const;

function invalid(name: string, expected: string, value: unknown, fix: string): never {
  throw clientConfigError('TGC_INVALID_OPTION', { path: `createFetch.${name}`, expected, received: describeValue(value), fix });
}

function fn<T>(name: string, value: unknown): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') invalid(name, 'a function', value, `Pass a function for ${name}, or leave it out.`);
  return value as T;
}

function positive(name: string, value: unknown, fallback: number | undefined, allowInfinity = false): number | undefined {
  if (value === undefined) return fallback;
  const ok = typeof value === 'number' && value > 0 && (Number.isFinite(value) || (allowInfinity && value === Number.POSITIVE_INFINITY));
  if (!ok)
    invalid(name, `a positive number of milliseconds${allowInfinity ? ' (or Infinity)' : ''}`, value, `Set ${name} in milliseconds.`);
  return value;
}

/** Validates and fills in defaults. @throws TollgateClientError */
export function normalizeOptions(options: CreateFetchOptions | undefined): NormalizedOptions {
  if (options === undefined) options = {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    invalid('options', 'an options object or nothing', options, 'Call createFetch() or createFetch({ ... }).');
  }
  for (const k of Object.keys(options)) {
    if (!(KNOWN as readonly string[]).includes(k)) {
      throw clientConfigError('TGC_UNKNOWN_OPTION', {
        path: `createFetch.${k}`,
        expected: `one of ${KNOWN.join(', ')}`,
        received: JSON.stringify(k),
        fix: unknownOptionFix(k, KNOWN),
      });
    }
  }
  const o = options;

  const given = fn<typeof fetch>('fetch', o.fetch);
  if (!given && typeof globalThis.fetch !== 'function') {
    throw clientConfigError('TGC_NO_FETCH', {
      path: 'createFetch.fetch',
      expected: 'a fetch function (option or global)',
      received: 'no fetch option and no globalThis.fetch',
      fix: 'Run on Node.js 20 or later, or pass { fetch } (for example undici.fetch).',
    });
  }

  const retries = o.retries ?? 4;
  if (!Number.isSafeInteger(retries) || retries < 0) invalid('retries', 'a whole number >= 0', retries, 'Use 0 to disable retries.');

  const jitter = o.jitter ?? 'full';
  if (jitter !== 'full' && jitter !== 'none') invalid('jitter', '"full" or "none"', jitter, 'Use "full" unless you are comparing.');

  const statuses = o.statuses ?? [429, 503];
  if (!Array.isArray(statuses) || !statuses.every((s) => Number.isInteger(s) && s >= 100 && s <= 599)) {
    invalid('statuses', 'an array of HTTP status codes', statuses, 'For example [429, 503].');
  }

  let idempotencyKey: (() => string) | undefined;
  if (o.idempotencyKey === true) idempotencyKey = () => crypto.randomUUID();
  else if (typeof o.idempotencyKey === 'function') idempotencyKey = o.idempotencyKey;
  else if (o.idempotencyKey !== undefined && o.idempotencyKey !== false) {
    invalid('idempotencyKey', 'true, false or a function returning a string', o.idempotencyKey, 'Use true for random UUIDs.');
  }

  let pace: Rule<PaceRequest>[] | undefined;
  if (typeof o.pace === 'string') pace = [{ name: 'pace', rate: o.pace, algorithm: 'leaky-bucket', burst: 1 }];
  else if (Array.isArray(o.pace)) pace = [...o.pace];
  else if (typeof o.pace === 'object' && o.pace !== null) pace = [o.pace as Rule<PaceRequest>];
  else if (o.pace !== undefined)
    invalid('pace', 'a rate such as "10/s", a rule, or an array of rules', o.pace, 'See docs/client.md#pacing.');

  const clock = o.clock ?? systemClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
    invalid('clock', 'an object with now(): number', clock, 'Pass a Clock such as new ManualClock().');
  }

  return {
    fetch: given,
    retries,
    baseMs: positive('baseMs', o.baseMs, 500) as number,
    capMs: positive('capMs', o.capMs, 10_000) as number,
    jitter,
    maxWaitMs: positive('maxWaitMs', o.maxWaitMs, 60_000, true) as number,
    deadlineMs: positive('deadlineMs', o.deadlineMs, undefined),
    timeoutMs: positive('timeoutMs', o.timeoutMs, undefined),
    statuses: new Set(statuses),
    idempotencyKey,
    pace,
    scope: fn('scope', o.scope) ?? ((url: URL) => url.origin),
    random: fn('random', o.random) ?? Math.random,
    clock,
    sleep: fn('sleep', o.sleep) ?? realSleep,
    onRetry: fn('onRetry', o.onRetry),
    onWait: fn('onWait', o.onWait),
    onGiveUp: fn('onGiveUp', o.onGiveUp),
  };
}
