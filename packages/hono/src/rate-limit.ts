/**
 * `rateLimit()` for Hono 4 and the mounting code every tollgate middleware shares: a
 * stage of core's pipeline run as Hono middleware, the decision copied to
 * `c.get('rateLimit')`. A route-level extension (`limiter.route`) adds its rules to the
 * app-level ones (or replaces them), decided as one all-or-nothing decision.
 */
import { configError, type Decision, describeValue, type ThrottleResult } from '@tollgate/core';
import {
  createRateLimit,
  type LimiterMethods,
  type LimiterOptionsOf,
  limiterMethods,
  normalizeLimiterOptions,
  type RequestRateLimit,
  type RouteOptionsOf,
  routeOptionsOf,
  type Stage,
} from '@tollgate/core/http';
import type { Context, MiddlewareHandler } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import { type HonoNext, honoPort, lifetime, takePacing } from './port.js';

/** What tollgate leaves on a request: `c.get('rateLimit')`, typed in every app (Hono's `ContextVariableMap`). */
export type RateLimitVariables = { rateLimit: RequestRateLimit | undefined };

declare module 'hono' {
  interface ContextVariableMap extends RateLimitVariables {}
}
/** The env of tollgate's middleware: `new Hono<RateLimitEnv>()`, or carried by `app.use`. */
export type RateLimitEnv = { Variables: RateLimitVariables };

/** Where the client address comes from. */
export interface ConnInfoOption {
  /**
   * The runtime's `getConnInfo` (`@hono/node-server/conninfo`, `hono/bun`, `hono/deno`,
   * `hono/cloudflare-workers`...): the default `ip()` key and the lists read its address.
   * Forwarding headers count only from a proxy named in `trustProxy`.
   * @example connInfo: getConnInfo
   */
  connInfo?: GetConnInfo;
}

type Callbacks = 'handler' | 'onRejected' | 'onStoreError' | 'skip';

export interface RateLimitOptions extends Omit<LimiterOptionsOf<Context, Context, HonoNext>, Callbacks>, ConnInfoOption {
  /** Requests for which this returns true bypass every rule. */
  skip?: (c: Context) => boolean | Promise<boolean>;
  /** Called for every refused request (before the answer), e.g. for logging. */
  onRejected?: (c: Context, decision: Decision) => void;
  /**
   * Answers refused requests yourself: status, `Retry-After` and the rate-limit headers
   * are already set on `c` when it runs.
   * @example handler: (c, d) => c.json({ error: 'slow down', retryAfterMs: d.retryAfterMs })
   */
  handler?: (c: Context, decision: Decision) => Response | Promise<Response>;
  /**
   * When the store fails: `'allow'`, `'deny'` (503), `'error'` (Hono's error handler), or a
   * function answering with a `Response`, or returning nothing to let the request on.
   * @default 'allow'
   */
  onStoreError?: 'allow' | 'deny' | 'error' | ((error: unknown, c: Context) => Response | undefined | Promise<Response | undefined>);
}

export type RateLimitMiddleware = MiddlewareHandler<RateLimitEnv> &
  LimiterMethods<Context> & {
    /** A route's middleware adding `rules` to this limiter's (one decision), or standing instead of them with `mode: 'replace'`. */
    route(options: RouteOptionsOf<Context>): MiddlewareHandler<RateLimitEnv>;
  };

const WORDING = {
  path: 'rateLimit',
  names: ['c', 'c', 'next'] as const,
  handler: '(c, decision) => Response',
  notObject: "Call rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], connInfo: getConnInfo }).",
};

type Carried = { rateLimit?: RequestRateLimit; slowDown?: ThrottleResult };

/** Copies what the pipeline left on the request into Hono's variables. */
function publish(c: Context): void {
  const { rateLimit, slowDown } = c as Context & Carried;
  if (rateLimit !== undefined) c.set('rateLimit', rateLimit);
  if (slowDown !== undefined) c.set('slowDown', slowDown);
}

/** A stage of core's pipeline as Hono middleware. */
export function middleware(stage: Stage<Context, Context, HonoNext>): MiddlewareHandler<RateLimitEnv> {
  return (c, next) =>
    new Promise<Response | undefined>((resolve, reject) => {
      const run: HonoNext = {
        pass() {
          publish(c);
          const pace = takePacing(c);
          resolve(
            next().then(
              () => {
                if (pace !== undefined) c.res = pace(c.res);
                // The outermost tollgate middleware follows the response the client gets.
                if (opened) c.res = lifetime.follow(c, c.res);
                return undefined;
              },
              (err: unknown) => {
                // No response to pace: the grant is closed on an empty one.
                pace?.(new Response(null));
                throw err;
              },
            ),
          );
        },
        answer(res) {
          publish(c);
          if (opened) lifetime.end(c, res.status);
          resolve(res);
        },
        drop() {
          if (opened) lifetime.end(c, undefined);
          // Outer middleware (an access log) see nginx's "client closed request"; the bytes go nowhere.
          resolve(new Response(null, { status: 499 }));
        },
        fail(err) {
          if (opened) lifetime.end(c, undefined);
          // Hono's error handler takes Errors only.
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      };
      const opened = lifetime.enter(c, run.answer);
      stage(c, c, run);
    });
}

/** A callback that answers with a Response, or lets the request on when it returns nothing. */
function answering(fn: (c: Context) => unknown, path: string): (c: Context, next: HonoNext) => Promise<void> {
  return async (c, next) => {
    const r = await fn(c);
    if (r instanceof Response) return next.answer(r);
    if (r === undefined) return next.pass();
    throw configError('TG_INVALID_CALLBACK_RESULT', {
      path,
      expected: 'a Response (or a promise of one)',
      received: describeValue(r),
      fix: 'Return c.json(...), c.text(...) or a new Response(...).',
    });
  };
}

/** Validates a `connInfo` option (`path`: the middleware's name). */
export function checkConnInfo<T>(connInfo: T, path: string): T {
  if (connInfo !== undefined && typeof connInfo !== 'function') {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.connInfo`,
      expected: "the runtime's getConnInfo, a function (c) => ConnInfo",
      received: describeValue(connInfo),
      fix: "On Node: import { getConnInfo } from '@hono/node-server/conninfo'.",
    });
  }
  return connInfo;
}

/** The options as core's pipeline calls them: Hono's `(c, decision)` signatures adapted. */
function adapt(options: RateLimitOptions) {
  const { connInfo, handler, onRejected, onStoreError, ...rest } = options ?? ({} as RateLimitOptions);
  checkConnInfo(connInfo, 'rateLimit');
  const storeFn = typeof onStoreError === 'function' ? onStoreError : undefined;
  const given = {
    ...rest,
    ...(onRejected !== undefined
      ? { onRejected: typeof onRejected === 'function' ? (c: Context, _: Context, d: Decision) => onRejected(c, d) : onRejected }
      : {}),
    ...(onStoreError !== undefined
      ? {
          onStoreError: storeFn
            ? (err: unknown, c: Context, _: Context, n: HonoNext) => answering((x) => storeFn(err, x), 'rateLimit.onStoreError')(c, n)
            : onStoreError,
        }
      : {}),
    ...(handler !== undefined ? { handler } : {}),
  } as LimiterOptionsOf<Context, Context, HonoNext>;
  const o = normalizeLimiterOptions<Context, typeof given>(given, WORDING);
  const reply = typeof handler === 'function' ? handler : undefined;
  const setup = reply
    ? { handler: (c: Context, _: Context, n: HonoNext, d: Decision) => answering((x) => reply(x, d), 'rateLimit.handler')(c, n) }
    : {};
  return { port: honoPort(connInfo), o, setup };
}

/**
 * Rate-limits requests with a stack of rules.
 * @example
 * import { getConnInfo } from '@hono/node-server/conninfo';
 * const limiter = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], connInfo: getConnInfo });
 * app.use(limiter);
 * app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }), login);
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const { port, o, setup } = adapt(options);
  const core = createRateLimit(port, o, setup);
  const handle = middleware(core.handle);
  return Object.assign(handle, limiterMethods(core), {
    route(options: RouteOptionsOf<Context>) {
      const r = routeOptionsOf<Context>(options);
      return middleware(core.route(r.rules, r.mode, 'route rules'));
    },
  });
}
