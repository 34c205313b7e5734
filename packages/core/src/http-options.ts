/**
 * The options every HTTP adapter shares, validated and normalised once at
 * construction: `statusCode`, `message`, `handler`, `skip`, `onRejected`, `dryRun`,
 * `onStoreError`, `name`, `timers`, and the default `ip()` key (`trustProxy`,
 * `ipv6Subnet`, shared with the controls) and header formatter (`headers`, `partitionKey`). Adapters check their
 * own options (unknown names, the Fastify hook, Express's `passOnStoreError`) and pass
 * the rest here with their name for error paths and their signatures for the wording,
 * so an option means, defaults to and fails the same way in every adapter.
 */

import type { Clock } from './clock.js';
import type { Timers } from './controls/timers.js';
import { configError, describe } from './errors.js';
import { compileHeaders, type HeaderFormatter, type HeadersOption } from './headers.js';
import { ip, type TrustProxy } from './keys.js';
import type { KeyFn } from './rules.js';
import { unknownOptionFix } from './suggest.js';
import type { Decision, Store } from './types.js';

/** How the default key of a limiter or control finds the client address. */
export interface ClientAddressOptions {
  /**
   * Which proxies in front of the app to trust when finding the client address (the
   * default `ip()` key). See docs/keys-and-proxies.md.
   * @default false
   * @example trustProxy: 'loopback' // nginx on the same machine
   */
  trustProxy?: TrustProxy;
  /**
   * IPv6 prefix length the default `ip()` key groups clients by; `false` for whole addresses.
   * @default 56
   */
  ipv6Subnet?: number | false;
}

/** The default key: the client address, trusted-proxy aware. */
export function clientAddressKey<Req>(o: ClientAddressOptions): KeyFn<Req> {
  return ip({
    ...(o.trustProxy !== undefined ? { trustProxy: o.trustProxy } : {}),
    ...(o.ipv6Subnet !== undefined ? { ipv6Subnet: o.ipv6Subnet } : {}),
  }) as KeyFn<Req>;
}

/**
 * Splits a control's options into the ones its core factory takes and its default key.
 * @example const [rest, defaultKey] = splitClientAddress<Request, typeof options>(options)
 */
export function splitClientAddress<Req, T extends ClientAddressOptions>(o: T): [Omit<T, 'trustProxy' | 'ipv6Subnet'>, KeyFn<Req>] {
  const { trustProxy, ipv6Subnet, ...rest } = o;
  return [
    rest,
    clientAddressKey<Req>({ ...(trustProxy !== undefined ? { trustProxy } : {}), ...(ipv6Subnet !== undefined ? { ipv6Subnet } : {}) }),
  ];
}

/**
 * The options of a limiter adapter (`rateLimit()` for Express, the Fastify plugin) that
 * do not name a framework type; each adapter's options extend these.
 */
export interface HttpLimiterOptions extends ClientAddressOptions {
  /** Where counters live. @default new MemoryStore() */
  store?: Store;
  /** Time source (tests: `new ManualClock()`). @default the store's clock */
  clock?: Clock;
  /** Namespace of the store keys. @default 'tg' */
  prefix?: string;
  /**
   * Rate-limit headers: `'draft-10'` (or `'draft-8'`, the same fields), `'draft-7'`, `'draft-6'`, `'legacy'`, an array, or false.
   * @default 'draft-10'
   * @example headers: ['draft-10', 'legacy']
   */
  headers?: HeadersOption;
  /**
   * Add the salted draft-10 partition key `pk`.
   * @default false
   * @example partitionKey: { salt: process.env.PK_SALT }
   */
  partitionKey?: false | { salt: string };
  /** Status of a refusal. @default 429 */
  statusCode?: number;
  /** Decide, count, send headers and publish events, but never refuse or delay. @default false */
  dryRun?: boolean;
  /** The limiter's name in diagnostics messages. @default 'rateLimit' */
  name?: string;
  /**
   * Timers that hold a delayed request (leaky-bucket queue waits).
   * @default systemTimers
   * @example timers: new ManualTimers(clock) // tests
   */
  timers?: Timers;
}

/** The shared options as an adapter receives them (functions typed by the adapter). */
export interface HttpOptionsInput extends HttpLimiterOptions {
  onStoreError?: unknown;
  message?: unknown;
  handler?: unknown;
  skip?: unknown;
  onRejected?: unknown;
}

/** How an adapter names itself and its callbacks in configuration errors. */
export interface HttpOptionsWording {
  /** The error path's root: `'rateLimit'` (Express), `'tollgate'` (Fastify). */
  path: string;
  /** The expected shapes of the function options, in the adapter's signatures. */
  handler: string;
  skip: string;
  onRejected: string;
  /** What `onStoreError` accepts, e.g. `"'allow', 'deny', 'error' or a function (err, req, res, next)"`. */
  onStoreError: string;
  /** What `message` accepts, e.g. `'a string, an object, or a function (req, decision) => string | object'`. */
  message: string;
}

/** The shared options after validation; the function types are the adapter's own. */
export interface HttpOptions<Req, O extends HttpOptionsInput> {
  defaultKey: KeyFn<Req>;
  /** Whether `trustProxy` names a proxy (the misconfiguration warnings are off then). */
  trusted: boolean;
  format: HeaderFormatter | undefined;
  pk: boolean;
  statusCode: number;
  /** `message` as a function; a constant message becomes one returning it. */
  message: ((req: Req, decision: Decision) => string | object) | undefined;
  handler: O['handler'];
  skip: O['skip'];
  onRejected: O['onRejected'];
  dryRun: boolean;
  onStoreError: Exclude<O['onStoreError'], undefined> | 'allow';
  name: string;
  timers: Timers | undefined;
}

/** What an adapter suggests when its options are not an object, or name an unknown option (left out or undefined: remove it or check its spelling). */
export interface OptionNameFixes {
  notObject: string;
  unknown?: ((name: string) => string | undefined) | undefined;
}

/**
 * Fails unless `options` is an object naming only `known` options; errors name `path`
 * (`'rateLimit'`, `'tollgate'`) and list `known` in its order.
 * @example checkOptionNames(options, 'rateLimit', KNOWN, { notObject: 'Call rateLimit({ rules }).', unknown: () => 'Check its spelling.' })
 */
export function checkOptionNames(options: unknown, path: string, known: ReadonlySet<string>, fixes: OptionNameFixes): void {
  if (typeof options !== 'object' || options === null) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'an options object { rules, ... }',
      received: describe(options),
      fix: fixes.notObject,
    });
  }
  for (const k of Object.keys(options)) {
    if (!known.has(k)) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `${path}.${k}`,
        expected: `one of ${[...known].join(', ')}`,
        received: JSON.stringify(k),
        fix: unknownOptionFix(k, known, fixes.unknown?.(k)),
      });
    }
  }
}

const STORE_ERROR_POLICIES: readonly unknown[] = ['allow', 'deny', 'error'];

function fn<T>(value: T, path: string, shape: string): T {
  if (value !== undefined && typeof value !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: shape,
      received: describe(value),
      fix: 'Pass a function or leave it out.',
    });
  }
  return value;
}

/**
 * Validates and normalises the shared options. Checks run in a fixed order, so the
 * first invalid option is the one reported.
 * @example const shared = normalizeHttpOptions<Request, RateLimitOptions>(options, EXPRESS_WORDING)
 */
export function normalizeHttpOptions<Req, O extends HttpOptionsInput>(o: O, w: HttpOptionsWording): HttpOptions<Req, O> {
  const statusCode = o.statusCode ?? 429;
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw configError('TG_INVALID_OPTION', {
      path: `${w.path}.statusCode`,
      expected: 'an HTTP error status from 400 to 599',
      received: describe(statusCode),
      fix: 'Keep the default 429.',
    });
  }
  if (o.dryRun !== undefined && typeof o.dryRun !== 'boolean') {
    throw configError('TG_INVALID_OPTION', {
      path: `${w.path}.dryRun`,
      expected: 'true or false',
      received: describe(o.dryRun),
      fix: 'Pass a boolean.',
    });
  }
  if (o.name !== undefined && (typeof o.name !== 'string' || o.name === '')) {
    throw configError('TG_INVALID_OPTION', {
      path: `${w.path}.name`,
      expected: 'a non-empty string',
      received: describe(o.name),
      fix: 'Name the limiter as it should appear in diagnostics.',
    });
  }
  const t = o.timers as unknown;
  if (
    t !== undefined &&
    (typeof t !== 'object' ||
      t === null ||
      typeof (t as Timers).setTimeout !== 'function' ||
      typeof (t as Timers).clearTimeout !== 'function')
  ) {
    throw configError('TG_INVALID_OPTION', {
      path: `${w.path}.timers`,
      expected: 'an object with setTimeout(fn, ms) and clearTimeout(handle)',
      received: describe(t),
      fix: 'Leave it out (process timers), or pass new ManualTimers(clock) in tests.',
    });
  }
  if (o.onStoreError !== undefined && typeof o.onStoreError !== 'function' && !STORE_ERROR_POLICIES.includes(o.onStoreError)) {
    throw configError('TG_INVALID_OPTION', {
      path: `${w.path}.onStoreError`,
      expected: w.onStoreError,
      received: describe(o.onStoreError),
      fix: "Use 'allow' (the default) to let requests through while the store is down.",
    });
  }
  let message: HttpOptions<Req, O>['message'];
  if (o.message !== undefined) {
    if (typeof o.message === 'function') message = o.message as HttpOptions<Req, O>['message'];
    else if (typeof o.message === 'string' || (typeof o.message === 'object' && o.message !== null)) {
      const m = o.message;
      message = () => m;
    } else {
      throw configError('TG_INVALID_OPTION', {
        path: `${w.path}.message`,
        expected: w.message,
        received: describe(o.message),
        fix: 'Leave it out to send an RFC 9457 problem body.',
      });
    }
  }
  return {
    defaultKey: clientAddressKey<Req>(o),
    trusted: o.trustProxy !== undefined && o.trustProxy !== false,
    format: compileHeaders(o.headers, o.partitionKey === undefined ? {} : { partitionKey: o.partitionKey }),
    pk: o.partitionKey !== undefined && o.partitionKey !== false,
    statusCode,
    message,
    handler: fn(o.handler, `${w.path}.handler`, w.handler),
    skip: fn(o.skip, `${w.path}.skip`, w.skip),
    onRejected: fn(o.onRejected, `${w.path}.onRejected`, w.onRejected),
    dryRun: o.dryRun === true,
    onStoreError: (o.onStoreError ?? 'allow') as HttpOptions<Req, O>['onStoreError'],
    name: o.name ?? 'rateLimit',
    timers: t as Timers | undefined,
  };
}
