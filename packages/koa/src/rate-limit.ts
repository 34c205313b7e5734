/**
 * `rateLimit()` for Koa: the Koa port and the mounting code. The request pipeline (skip,
 * decide, headers, diagnostics, counting by outcome, hold, refuse, store errors) is core's
 * (`@tollgate/core/http`), so every adapter answers alike. A route-level extension
 * (`limiter.route`, for `@koa/router`) adds its rules to the app-level ones (or replaces
 * them), decided as one all-or-nothing decision.
 *
 * Koa middleware returns a promise; core's pipeline continues in callbacks. A {@link Turn}
 * joins them: passing on resolves the middleware's promise with the rest of the chain
 * (`next()`), a failure rejects it (Koa's error handling), an answer resolves it once the
 * body is set, and Koa writes the response.
 */
import type { Decision } from '@tollgate/core';
import {
  createRateLimit,
  type HttpPort,
  isThenable,
  limiterMethods,
  lowerHeaderName,
  type RequestRateLimit,
  routeOptionsOf,
} from '@tollgate/core/http';
import { nodeOperations } from '@tollgate/core/node';
import type { Context, Middleware, Next } from 'koa';
import { normalise, type RateLimitMiddleware, type RateLimitOptions } from './options.js';

declare module 'koa' {
  interface DefaultState {
    /** The rate-limit decision: every tollgate limiter this request has met, combined. */
    rateLimit?: RequestRateLimit;
  }
}

/** One request's way through a tollgate middleware: Koa's `next`, and how the middleware's promise settles. */
export interface Turn {
  readonly ctx: Context;
  readonly next: Next;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** The request is `ctx`; the response and the continuation are the request's {@link Turn}. */
export const koaPort: HttpPort<Context, Turn, Turn> = {
  name: 'koa',
  // A rule's actualCost is given the context, as the app's middleware see it.
  handlerResponse: (ctx) => ctx,
  // Koa's own proxy trust (`app.proxy`): tollgate warns once when it is on and trustProxy is not.
  frameworkTrust: (ctx) => ctx.app?.proxy,
  ...nodeOperations<Context, Turn>(
    (ctx) => ctx.req,
    (t) => t.ctx.res,
  ),
  getHeader: (t, name) => t.ctx.res.getHeader(lowerHeaderName(name)),
  setHeader: (t, name, value) => {
    t.ctx.res.setHeader(name, value);
  },
  // Through ctx.status: Koa answers 404 for a status it did not see set.
  status: (t, code) => {
    t.ctx.status = code;
  },
  // Bytes with the type set first: Koa would type a string as text/plain and an object as JSON.
  send: (t, status, contentType, body) => {
    const ctx = t.ctx;
    ctx.status = status;
    ctx.set('Content-Type', contentType);
    ctx.body = Buffer.from(body);
    t.resolve(undefined);
  },
  pass: (t) => t.resolve(t.next()),
  fail: (t, err) => t.reject(err),
  // The client left while held: the middleware's promise settles and Koa, finding the response unwritable, sends nothing.
  drop: (t) => t.resolve(undefined),
  locals: (ctx) => ctx.state,
};

type Stage = (ctx: Context, t: Turn, next: Turn) => void;

/** A pipeline stage as Koa middleware named `name`: its promise settles as the stage passes, fails or answers. */
export function asMiddleware(name: string, stage: Stage): (ctx: Context, next: Next) => Promise<unknown> {
  const middleware = (ctx: Context, next: Next) =>
    new Promise((resolve, reject) => {
      const t: Turn = { ctx, next, resolve, reject };
      stage(ctx, t, t);
    });
  // Named for stack traces and Koa's debug output.
  return Object.defineProperty(middleware, 'name', { value: name });
}

/** Runs an app callback that answers through `ctx`, then ends the turn once it has settled. */
function answering<A extends unknown[]>(fn: (...args: A) => unknown, t: Turn, ...args: A): unknown {
  const r = fn(...args);
  if (isThenable(r)) return Promise.resolve(r).then(() => t.resolve(undefined));
  t.resolve(undefined);
  return r;
}

/**
 * Rate-limits requests with a stack of rules.
 * @example
 * import { rateLimit } from '@tollgate/koa';
 * const limiter = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], trustProxy: 'loopback' });
 * app.use(limiter);
 * router.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] }), login);
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const o = normalise(options);
  const { skip, onRejected, onStoreError, handler } = o;
  // The app's callbacks in the pipeline's (req, res, next) signatures.
  const core = createRateLimit(
    koaPort,
    {
      ...o,
      skip: skip === undefined ? undefined : (ctx: Context) => skip(ctx),
      onRejected: onRejected === undefined ? undefined : (ctx: Context, _t: Turn, d: Decision) => onRejected(ctx, d),
      onStoreError:
        typeof onStoreError === 'function'
          ? (err: unknown, ctx: Context, _t: Turn, t: Turn) => answering(onStoreError, t, err, ctx, t.next)
          : onStoreError,
    } as typeof o,
    handler === undefined ? {} : { handler: (ctx, _t, t, d) => answering(handler, t, ctx, t.next, d) },
  );
  const middleware = asMiddleware('rateLimit', core.handle) as RateLimitMiddleware;
  middleware.route = function route(options) {
    const r = routeOptionsOf<Context>(options);
    return asMiddleware('rateLimitRoute', core.route(r.rules, r.mode, 'route rules')) as Middleware;
  };
  Object.assign(middleware, limiterMethods(core));
  return middleware;
}
