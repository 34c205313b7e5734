/**
 * One stack's request pipeline, written once for every framework: one store decision,
 * merged with the decisions the request met before, then headers, diagnostics, counting by
 * outcome, and pass, hold or refuse; a failed store goes to the store-error policy.
 * Everything is built once per stack; a request only calls functions that already exist.
 */
import { systemTimers } from '../controls/timers.js';
import { countedRules, refundUncountedOnFinish } from '../count-if.js';
import { publishDecision, publishStoreError } from '../diagnostics.js';
import { decisionOps, type Limiter, reservationEngine } from '../limiter.js';
import { mergeDecisions } from '../merge.js';
import { nextAdmission } from '../next-admission.js';
import type { ReservationEngine } from '../reserve.js';
import type { Decision, RuleResult, Store } from '../types.js';
import { headerWriter, type NextMs, refuser, storeFailure } from './answers.js';
import { isThenable } from './callbacks.js';
import { holdRequest } from './lifetime.js';
import { dropHeld, type HttpPort, localsOf as localsOn } from './port.js';
import type { RateLimitSetup, RateLimitSource } from './rate-limit.js';
import { actualCosts, requestDecision } from './settle.js';
import type { proxyWarnings } from './warnings.js';

/** Where a stage marks its decision on the request for route stages (null: skipped). */
export type WithDecision = Record<symbol, Decision | null | undefined>;

/** The callbacks of a limiter in the pipeline's own (port-neutral) signatures. */
export interface Callbacks<Req, Res, Next> {
  skip: ((req: Req, res: Res) => unknown) | undefined;
  message: ((req: Req, decision: Decision) => unknown) | undefined;
  handler: ((req: Req, res: Res, next: Next, decision: Decision) => unknown) | undefined;
  onRejected: ((req: Req, res: Res, decision: Decision) => unknown) | undefined;
  onStoreError: 'allow' | 'deny' | 'error' | ((err: unknown, req: Req, res: Res, next: Next) => unknown);
}

/** The store's own deadline, when it has one (RedisStore's `timeoutMs`). */
function storeDeadline(store: Store): number | undefined {
  const t = (store as { timeoutMs?: unknown }).timeoutMs;
  return typeof t === 'number' && t > 0 ? t : undefined;
}

/** Decision `all` with the rules of `refunded` as they are after its refund. */
function afterRefund(all: Decision, refunded: Decision): Decision {
  const ops = decisionOps(refunded);
  if (ops === undefined) return all;
  const rules = all.rules.map((r): RuleResult => {
    if (!refunded.rules.includes(r) || !r.allowed) return r;
    const op = ops.find((o) => o.rule.name === r.name);
    return op === undefined ? r : { ...r, remaining: Math.min(r.limit, r.remaining + op.cost) };
  });
  return { ...all, rules };
}

/** `(req, res, next, prior?, fresh?)`: `prior` is given back on a refusal; `fresh` replaces earlier headers. */
export type Pipeline<Req, Res, Next> = (req: Req, res: Res, next: Next, prior?: Decision, fresh?: boolean) => void;

/** The app's callbacks in the pipeline's signatures (an adapter's `handler` first). */
export function callbacks<Req, Res, Next>(o: RateLimitSource<Req>, setup: RateLimitSetup<Req, Res, Next>): Callbacks<Req, Res, Next> {
  return {
    skip: o.skip as Callbacks<Req, Res, Next>['skip'],
    message: o.message,
    handler: setup.handler ?? (o.handler as Callbacks<Req, Res, Next>['handler']),
    onRejected: o.onRejected as Callbacks<Req, Res, Next>['onRejected'],
    onStoreError: o.onStoreError as Callbacks<Req, Res, Next>['onStoreError'],
  };
}

/**
 * One stack's decision handler: (the proxy warnings) → one store decision → merged with the
 * request's earlier decisions → headers → diagnostics → counting by outcome → pass, hold or
 * refuse; a failed store goes to the failure policy. `remember`: where the app-level
 * decision is marked for route stages; `owner`: the app-level limiter, whose units a route
 * refusal gives back.
 */
export function pipeline<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  lim: Limiter<Req>,
  o: RateLimitSource<Req>,
  s: RateLimitSetup<Req, Res, Next> & Callbacks<Req, Res, Next>,
  remember: symbol | undefined,
  owner: Limiter<Req> | undefined,
  warnings: ReturnType<typeof proxyWarnings> | undefined,
): Pipeline<Req, Res, Next> {
  const { format, dryRun, name } = o;
  const timers = o.timers ?? systemTimers;
  const counted = countedRules(lim);
  const settleOnFinish = actualCosts(lim, name, port);
  const engine = reservationEngine(lim) as ReservationEngine;
  const firstUnit = nextAdmission(lim);
  const deadline = storeDeadline(lim.store);
  const localsOf = localsOn(port);
  const headers = headerWriter(port, lim, o);
  const refuse = refuser(port, o, s);
  const failed = storeFailure(port, name, s.onStoreError);

  /** `shown`: the decision whose rules the headers list (the request's whole state after a refund). */
  function answer(req: Req, res: Res, next: Next, d: Decision, all: Decision, nextMs: NextMs, fresh: boolean, shown = d): void {
    if (format !== undefined && port.headersSent?.(res) !== true) headers(req, res, shown, all, nextMs, fresh);
    publishDecision(d, req, name, dryRun);
    if (d.allowed || dryRun) {
      if (d.allowed && settleOnFinish !== undefined) settleOnFinish(req, res, d);
      if (d.allowed && counted.length > 0) refundUncountedOnFinish(lim, counted, req, (fn) => port.onFinish(req, res, fn), d, name);
      if (d.delayMs > 0 && !dryRun) {
        // A client that leaves while waiting never reaches the handler.
        holdRequest(port, req, res, d.delayMs, timers)
          .then((stillThere) => {
            if (stillThere) port.pass(next);
            else dropHeld(port, next);
          })
          .catch((err: unknown) => port.fail(next, err));
        return;
      }
      port.pass(next);
      return;
    }
    refuse(req, res, next, d);
  }

  /** Answers, guarding the app's callbacks: whatever they throw goes to the error handler. */
  function safely(req: Req, res: Res, next: Next, d: Decision, all: Decision, nextMs: NextMs, fresh: boolean, shown = d): void {
    try {
      answer(req, res, next, d, all, nextMs, fresh, shown);
    } catch (err) {
      port.fail(next, err);
    }
  }

  function decided(req: Req, res: Res, next: Next, prior: Decision | undefined, fresh: boolean, d: Decision, t0: number): void {
    if (remember !== undefined) (req as WithDecision)[remember] = d;
    const locals = localsOf(req);
    const earlier = locals.rateLimit;
    const all = mergeDecisions(earlier, d);
    locals.rateLimit = requestDecision(all, earlier, d.allowed ? d : undefined, engine);
    if (!d.allowed && !dryRun && prior !== undefined && owner !== undefined) {
      // A route-level refusal: the app-level units go back first, so that the headers and
      // `rateLimit` show the state after the refund.
      owner.refund(req, prior).then(
        () => {
          const after = afterRefund(all, prior);
          locals.rateLimit = after;
          // Every item again, in place of what the earlier stages wrote before the refund.
          safely(req, res, next, d, after, undefined, true, after);
        },
        (err) => {
          publishStoreError(err, req, name, 'allow');
          safely(req, res, next, d, all, undefined, fresh);
        },
      );
      return;
    }
    if (format !== undefined && d.degraded === undefined && firstUnit.needed(d)) {
      // Rare (a rule just ran dry): ask the store when its next unit comes, for an exact `t`,
      // within what is left of the store's deadline: the whole decision stays inside it.
      const left = deadline === undefined ? undefined : deadline - (performance.now() - t0);
      withinDeadline(
        () => firstUnit.get(req, d),
        left,
        (err) => publishStoreError(err, req, name, 'allow'),
        (nextMs) => safely(req, res, next, d, all, nextMs, fresh),
      );
      return;
    }
    safely(req, res, next, d, all, undefined, fresh);
  }

  return function decide(req, res, next, prior, fresh = false): void {
    if (warnings !== undefined) {
      try {
        warnings(port, req);
      } catch (err) {
        // A request without the fields the port reads (a mock in the app's tests): the app's error, not a throw out of the middleware.
        port.fail(next, err);
        return;
      }
    }
    const t0 = deadline === undefined ? 0 : performance.now();
    let d: Decision | Promise<Decision>;
    try {
      d = lim.decide(req);
    } catch (err) {
      failed(req, res, next, err);
      return;
    }
    if (isThenable(d)) {
      (d as Promise<Decision>).then(
        (v) => decided(req, res, next, prior, fresh, v, t0),
        (err) => failed(req, res, next, err),
      );
      return;
    }
    decided(req, res, next, prior, fresh, d as Decision, t0);
  };
}

/**
 * Calls `done` with what `ask` resolves to within `leftMs` (undefined: no limit), or with
 * undefined once that time has passed; a rejection goes to `failed`, then `done(undefined)`.
 */
function withinDeadline<T>(
  ask: () => Promise<T>,
  leftMs: number | undefined,
  failed: (err: unknown) => void,
  done: (v: T | undefined) => void,
): void {
  if (leftMs !== undefined && leftMs <= 0) {
    done(undefined);
    return;
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  let over = false;
  if (leftMs !== undefined) {
    timer = setTimeout(() => {
      over = true;
      done(undefined);
    }, leftMs);
    timer.unref?.();
  }
  ask().then(
    (v) => {
      if (timer !== undefined) clearTimeout(timer);
      if (!over) done(v);
    },
    (err: unknown) => {
      if (timer !== undefined) clearTimeout(timer);
      if (over) return;
      failed(err);
      done(undefined);
    },
  );
}
