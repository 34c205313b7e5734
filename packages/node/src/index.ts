/**
 * @tollgate/node — tollgate for plain `node:http` / `node:https` servers: the
 * node port of core's request pipeline (`@tollgate/core/http`).
 *
 * Each factory returns an async function `(req, res) => Promise<boolean>`: `true` when
 * the request may go on, `false` when tollgate already answered it (a refusal, or an
 * error response). `.middleware` is the same as connect-style `(req, res, next)`
 * middleware, which calls `next(err)` on the app's errors.
 * @example
 * const limit = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }] });
 * http.createServer(async (req, res) => {
 *   if (!(await limit(req, res))) return;
 *   res.end('hello');
 * });
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ByteRateLimit, ConcurrencyLimit, Decision, Shedder, ShedOptions, ThrottleResult } from '@tollgate/core';
import {
  type ConcurrencyFlowOptions,
  concurrencyFlow,
  createRateLimit,
  isThenable,
  type LimiterMethods,
  type LimiterOptionsOf,
  type LimitRateFlowOptions,
  limiterMethods,
  limitRateFlow,
  normalizeLimiterOptions,
  RATE_LIMIT_WORDING,
  type RequestRateLimit,
  type RouteOptionsOf,
  routeOptionsOf,
  type SlowDownFlowOptions,
  type Stage,
  shedFlow,
  slowDownFlow,
} from '@tollgate/core/http';
import { type NodeNext, nodePort, untilOver } from '@tollgate/core/node';

export * from '@tollgate/core/essentials';
export type { ClientAddressOptions } from '@tollgate/core/http';
export type { NodeNext } from '@tollgate/core/node';

declare module 'node:http' {
  interface IncomingMessage {
    /** The rate-limit decision: every tollgate limiter this request has met, combined, with `settle(actual)` for a cost known after the work (docs/reserve.md). */
    rateLimit?: RequestRateLimit;
    /** What the slow-down throttle decided for this request (hits and delay). */
    slowDown?: ThrottleResult;
  }
}

type Req = IncomingMessage;
type Res = ServerResponse;

/**
 * What the async form does with the app's errors (a throwing key function, ...). One that
 * throws or rejects itself gets the default answer. @default a 500, logged to stderr
 */
export type ErrorHandler = (err: unknown, req: Req, res: Res) => void;

interface Common {
  /** The async form's answer to the app's errors; the middleware form calls `next(err)` instead. */
  onError?: ErrorHandler;
}

export interface RateLimitOptions extends LimiterOptionsOf<Req, Res, NodeNext>, Common {
  /**
   * Answers refused requests yourself. Status, `Retry-After` and the rate-limit headers
   * are already set when it runs; end the response (or call `next()` to let it on).
   */
  handler?: (req: Req, res: Res, next: NodeNext, decision: Decision) => unknown;
}
export interface SlowDownOptions extends SlowDownFlowOptions<Req>, Common {}
export interface ConcurrencyOptions extends ConcurrencyFlowOptions<Req>, Common {}
export interface ShedOptionsNode extends ShedOptions<Req>, Common {}
export interface LimitRateOptions extends LimitRateFlowOptions<Req>, Common {}

/** The async form, with the connect-style form beside it. */
export type NodeLimiter = ((req: Req, res: Res) => Promise<boolean>) & { middleware: (req: Req, res: Res, next: NodeNext) => void };

const defaultOnError: ErrorHandler = (err, _req, res) => {
  console.error(err);
  if (res.writableEnded) return;
  if (!res.headersSent) {
    res.statusCode = 500;
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  }
  res.end('Internal Server Error');
};

/**
 * Hands the app's error to `onError`. An `onError` that fails too (throws, or rejects: one
 * written Express-style, `res.status(500)`, or async) gets the default answer, a 500, so the
 * request is still answered and nothing is left unhandled.
 */
function handOver(handleError: ErrorHandler, err: unknown, req: Req, res: Res): void {
  let r: unknown;
  try {
    r = handleError(err, req, res);
  } catch (thrown) {
    defaultOnError(thrown, req, res);
    return;
  }
  if (isThenable(r)) Promise.resolve(r).catch((thrown: unknown) => defaultOnError(thrown, req, res));
}

/** Both forms of one stage. The async form settles `false` once tollgate answered the request. */
function forms<T extends object>(stage: Stage<Req, Res, NodeNext>, onError: ErrorHandler | undefined, extra: T): NodeLimiter & T {
  const handleError = onError ?? defaultOnError;
  const limit = (req: Req, res: Res) =>
    new Promise<boolean>((resolve) => {
      let settled = false;
      let unwatch = () => {};
      const answered = () => {
        if (settled) return;
        settled = true;
        resolve(false);
      };
      stage(req, res, (err?: unknown) => {
        if (settled) return;
        settled = true;
        unwatch();
        if (err === undefined) {
          resolve(true);
          return;
        }
        resolve(false);
        handOver(handleError, err, req, res);
      });
      if (settled) return;
      // Answered in this tick (an in-process refusal), or later: a refusal, a custom
      // handler's answer, or a client that left while held (seen on the connection too:
      // a queued pipelined response emits neither `finish` nor `close`).
      if (res.writableEnded) answered();
      else unwatch = untilOver(req, res, answered);
    });
  const middleware = (req: Req, res: Res, next: NodeNext) => stage(req, res, next);
  return Object.assign(limit, { middleware }, extra);
}

/**
 * Rate-limits requests with a stack of rules.
 * @example const limit = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], trustProxy: 'loopback' })
 */
export function rateLimit(options: RateLimitOptions): NodeLimiter &
  LimiterMethods<Req> & {
    /**
     * A route-level stage adding `rules` to this limiter's (call it after the limiter; one
     * all-or-nothing decision), or standing instead of them with `mode: 'replace'`.
     */
    route(options: RouteOptionsOf<Req>): NodeLimiter;
  } {
  const { onError, ...rest } = options ?? ({} as RateLimitOptions);
  const o = normalizeLimiterOptions<Req, RateLimitOptions>(rest, RATE_LIMIT_WORDING);
  const core = createRateLimit(nodePort, o);
  return forms(core.handle, onError, {
    ...limiterMethods(core),
    route(options: RouteOptionsOf<Req>) {
      const r = routeOptionsOf<Req>(options);
      return forms(core.route(r.rules, r.mode, 'route rules'), onError, {});
    },
  });
}

/** Delays requests from a key once it has sent more than `delayAfter` in `window`. */
export function slowDown(options: SlowDownOptions): NodeLimiter & { reset(req: Req): Promise<void>; close(): Promise<void> } {
  const { onError, ...rest } = options ?? ({} as SlowDownOptions);
  const { stage, throttle, close } = slowDownFlow(nodePort, rest);
  return forms(stage, onError, { reset: (req: Req) => throttle.reset(req), close });
}

/** Limits the requests in flight per key (429) and/or in total (503). */
export function concurrency(options: ConcurrencyOptions): NodeLimiter & { readonly limit: ConcurrencyLimit<Req>; close(): Promise<void> } {
  const { onError, ...rest } = options ?? ({} as ConcurrencyOptions);
  const { stage, limit, close } = concurrencyFlow(nodePort, rest);
  return forms(stage, onError, { limit, close });
}

/** Answers 503 with `Retry-After` while the server is overloaded; call it first. */
export function shed(options: ShedOptionsNode): NodeLimiter & { readonly shedder: Shedder<Req>; close(): void } {
  const { onError, ...rest } = options ?? ({} as ShedOptionsNode);
  const { stage, shedder, close } = shedFlow(nodePort, rest);
  return forms(stage, onError, { shedder, close });
}

/**
 * Paces response bodies with a token bucket on bytes per key (all of a client's responses
 * share it); refuses nothing. Call it before writing the response.
 * @example const pace = limitRate({ rate: '2MB/s', burst: '16MB' }); if (!(await pace(req, res))) return;
 */
export function limitRate(options: LimitRateOptions): NodeLimiter & { readonly limit: ByteRateLimit<Req>; close(): Promise<void> } {
  const { onError, ...rest } = options ?? ({} as LimitRateOptions);
  const { stage, limit, close } = limitRateFlow(nodePort, rest);
  return forms(stage, onError, { limit, close });
}
