/**
 * `rateLimit()` for Express 4 and 5: framework plumbing only. Deciding
 * is the core limiter's; keys, headers, refusal bodies and diagnostics come from core,
 * so the Fastify plugin answers exactly alike.
 *
 * Per request: skip? → one store decision → `req.rateLimit` → headers (draft-10 items
 * appended to earlier limiters') → diagnostics → next(), a delay, or the refusal.
 * A route-level extension (`limiter.route`) decides only its own rules when the
 * app-level middleware already ran, and refunds the app-level consumption when it
 * refuses, so the combination is all-or-nothing.
 */
import {
  configError,
  countedRules,
  createLimiter,
  type Decision,
  describeValue,
  guardAppFn,
  guardRules,
  type HeaderContext,
  type HeaderFormatter,
  hold,
  isAppError,
  isCapacityRefusal,
  type KeyFn,
  type Limiter,
  mergeDecisions,
  messageContentType,
  messageText,
  nextAdmission,
  publishDecision,
  publishStoreError,
  type Refusal,
  refundUncountedOnFinish,
  refusal,
  storeFailureRefusal,
  unknownOptionFix,
} from '@tollgate/core';
import type { NextFunction, Request, Response } from 'express';
import { type Normalised, normalise, type RateLimitMiddleware, type RateLimitOptions, type RouteOptions } from './options.js';

declare global {
  namespace Express {
    interface Request {
      /** The rate-limit decision: every tollgate limiter this request has met, combined. */
      rateLimit?: Decision;
    }
  }
}

/**
 * Where a limiter leaves its app-level decision on the request (`null`: skipped), for its
 * route-level extension to refund. One symbol per limiter: no per-request allocation.
 */
type Slot = symbol;
/** Per rule, the exact ms until a cost-1 request would pass, when it had to be asked for. */
type NextMs = readonly (number | undefined)[] | undefined;
type WithSlot = Request & Record<Slot, Decision | null | undefined>;

function writeRefusal(res: Response, r: Refusal): void {
  res.statusCode = r.status;
  for (const [name, value] of r.headers) res.setHeader(name, value);
}

function sendBody(res: Response, contentType: string, body: string): void {
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

/**
 * Rate-limits requests with a stack of rules.
 * @example
 * import { rateLimit, user } from '@tollgate/express';
 * const limiter = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], trustProxy: 'loopback' });
 * app.use(limiter);
 * app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] }), login);
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const o = normalise(options);
  const base = {
    ...(o.store !== undefined ? { store: o.store } : {}),
    ...(o.clock !== undefined ? { clock: o.clock } : {}),
    ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
    defaultKey: guardAppFn(o.defaultKey) as KeyFn<Request>,
  };
  const limiter = createLimiter<Request>({ rules: guardRules(o.rules, 'rules'), ...base });
  const slot: Slot = Symbol(`tollgate:${o.name}`);
  const decideApp = decider(limiter, o, limiter, slot);

  const middleware = function rateLimit(req: Request, res: Response, next: NextFunction): void {
    if (o.skip === undefined) {
      decideApp(req, res, next, undefined);
      return;
    }
    skipThen(o, req, res, next, slot, () => decideApp(req, res, next, undefined));
  } as RateLimitMiddleware;

  middleware.route = function route(routeOptions: RouteOptions) {
    if (typeof routeOptions !== 'object' || routeOptions === null) {
      throw configError('TG_INVALID_OPTION', {
        path: 'route',
        expected: 'an options object { rules }',
        received: describeValue(routeOptions),
        fix: "Call limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m' }] }).",
      });
    }
    const extra = Object.keys(routeOptions).find((k) => k !== 'rules');
    if (extra !== undefined) {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `route.${extra}`,
        expected: 'rules',
        received: JSON.stringify(extra),
        fix: unknownOptionFix(extra, ['rules'], 'Route-level options other than rules come from the app-level limiter.'),
      });
    }
    const routeRules = guardRules(routeOptions.rules, 'route rules');
    // Validates the route rules against the app-level ones (no shared names) and decides
    // both as one atomic stack when the app-level middleware did not run first.
    const combined = limiter.extend(routeRules);
    const only = createLimiter<Request>({ rules: routeRules, ...base, store: limiter.store });
    const decideCombined = decider(combined, o, limiter, slot);
    const decideOnly = decider(only, o, limiter, slot);
    return function rateLimitRoute(req: Request, res: Response, next: NextFunction): void {
      const prior = (req as WithSlot)[slot];
      if (prior === null) {
        // The app-level middleware skipped this request: so does its route extension.
        next();
        return;
      }
      if (prior !== undefined) {
        decideOnly(req, res, next, prior);
        return;
      }
      if (o.skip === undefined) {
        decideCombined(req, res, next, undefined);
        return;
      }
      skipThen(o, req, res, next, slot, () => decideCombined(req, res, next, undefined));
    };
  };

  middleware.reset = (req: Request) => limiter.reset(req);
  middleware.peek = (req: Request) => limiter.peek(req);
  return middleware;
}

function skipThen(o: Normalised, req: Request, res: Response, next: NextFunction, slot: Slot, go: () => void): void {
  const skip = o.skip as NonNullable<Normalised['skip']>;
  const onSkip = (skipped: boolean) => {
    if (!skipped) return go();
    (req as WithSlot)[slot] = null;
    next();
  };
  let result: boolean | Promise<boolean>;
  try {
    result = skip(req, res);
  } catch (err) {
    next(err);
    return;
  }
  if (typeof result === 'boolean') {
    onSkip(result);
    return;
  }
  Promise.resolve(result).then((v) => onSkip(v === true), next);
}

/**
 * The per-request path for one limiter: consume, then answer. `owner` is the app-level
 * limiter, whose decision is left in the request's `slot`; `prior` is the app-level
 * decision to give back if this (route-level) check refuses.
 */
function decider(lim: Limiter<Request>, o: Normalised, owner: Limiter<Request>, slot: Slot) {
  const { format, pk, dryRun, name, handler, message, onRejected, statusCode, onStoreError, timers } = o;
  const counted = countedRules(lim);
  const firstUnit = nextAdmission(lim);

  function headers(req: Request, res: Response, d: Decision, all: Decision, f: HeaderFormatter, nextMs: NextMs): void {
    const context: HeaderContext = { all: all.rules };
    if (pk) context.keys = lim.resolve(req).map((op) => op.key);
    if (nextMs !== undefined) context.next = nextMs;
    const fields = f(d.rules, d.at, context);
    for (const field of fields) {
      let value = field.value;
      if (field.append) {
        const prev = res.getHeader(field.name);
        if (prev !== undefined && prev !== '') value = `${Array.isArray(prev) ? prev.join(', ') : String(prev)}, ${value}`;
      }
      res.setHeader(field.name, value);
    }
  }

  function refuse(req: Request, res: Response, next: NextFunction, d: Decision): void {
    onRejected?.(req, res, d);
    const r = refusal(d, { statusCode });
    writeRefusal(res, r);
    if (handler !== undefined) {
      handler(req, res, next, d);
      return;
    }
    if (message !== undefined && !isCapacityRefusal(d)) {
      const body = message(req, d);
      sendBody(res, messageContentType(body), messageText(body));
      return;
    }
    sendBody(res, r.contentType, JSON.stringify(r.body));
  }

  function decided(req: Request, res: Response, next: NextFunction, prior: Decision | undefined, d: Decision): void {
    // Only the app-level decision is remembered: it is what a route-level refusal gives back.
    if (lim === owner) (req as WithSlot)[slot] = d;
    const all = mergeDecisions(req.rateLimit, d);
    req.rateLimit = all;
    if (format !== undefined && firstUnit.needed(d)) {
      // Rare (a rule just ran dry): ask the store when its next unit comes, for an exact `t`.
      firstUnit
        .get(req, d)
        .then(
          (nextMs) => answer(req, res, next, prior, d, all, nextMs),
          (err) => {
            publishStoreError(err, req, name, 'allow');
            answer(req, res, next, prior, d, all, undefined);
          },
        )
        .catch(next);
      return;
    }
    answer(req, res, next, prior, d, all, undefined);
  }

  function answer(
    req: Request,
    res: Response,
    next: NextFunction,
    prior: Decision | undefined,
    d: Decision,
    all: Decision,
    nextMs: NextMs,
  ): void {
    if (format !== undefined) headers(req, res, d, all, format, nextMs);
    publishDecision(d, req, name, dryRun);
    if (d.allowed || dryRun) {
      if (d.allowed && counted.length > 0) refundUncountedOnFinish(lim, counted, req, res, d, name);
      if (d.delayMs > 0 && !dryRun) {
        // A client that leaves while waiting never reaches the handler.
        hold(res, d.delayMs, timers).then((stillThere) => {
          if (stillThere) next();
        });
        return;
      }
      next();
      return;
    }
    if (prior !== undefined) owner.refund(req, prior).catch((err) => publishStoreError(err, req, name, 'allow'));
    refuse(req, res, next, d);
  }

  function failed(req: Request, res: Response, next: NextFunction, err: unknown): void {
    if (isAppError(err)) {
      next(err);
      return;
    }
    if (onStoreError === 'allow') {
      publishStoreError(err, req, name, 'allow');
      next();
      return;
    }
    if (onStoreError === 'deny') {
      publishStoreError(err, req, name, 'deny');
      const r = storeFailureRefusal();
      writeRefusal(res, r);
      sendBody(res, r.contentType, JSON.stringify(r.body));
      return;
    }
    if (onStoreError === 'error') {
      publishStoreError(err, req, name, 'error');
      next(err);
      return;
    }
    publishStoreError(err, req, name, 'custom');
    onStoreError(err, req, res, next);
  }

  return function decide(req: Request, res: Response, next: NextFunction, prior: Decision | undefined): void {
    let d: Decision | undefined;
    try {
      // An in-process store (MemoryStore) decides in this tick: no promise turn per request.
      d = lim.consumeSync(req);
    } catch (err) {
      failed(req, res, next, err);
      return;
    }
    if (d !== undefined) {
      try {
        decided(req, res, next, prior, d);
      } catch (err) {
        // A throwing handler, onRejected or message function is an app bug: Express's error handler gets it.
        next(err);
      }
      return;
    }
    lim
      .consume(req)
      .then(
        (d) => decided(req, res, next, prior, d),
        (err) => failed(req, res, next, err),
      )
      // A throwing handler, onRejected or message function is an app bug: Express's error handler gets it.
      .catch(next);
  };
}
