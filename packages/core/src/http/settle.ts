/**
 * Costs known after the response, on every port: each admitted stage of a request is a
 * reservation of its estimate, settled either by the handler (`req.rateLimit.settle(n)`,
 * every stage at once) or, for the rules that declare `actualCost`, when the response
 * finishes (a streamed response finishes when its stream ends; an aborted one never does,
 * and keeps the estimate). Written once here: the ports only carry `req` and `res`.
 */
import { publishStoreError } from '../diagnostics.js';
import { type Limiter, reservationEngine } from '../limiter.js';
import { actualUnits, alreadySettled, type ReservationEngine, settleDecision } from '../reserve.js';
import type { Decision } from '../types.js';
import { isThenable } from './callbacks.js';
import { type HttpPort, localsOf as localsOn } from './port.js';

/** `req.rateLimit` as a handler sees it: the request's decision, and its settle. */
export type RequestRateLimit = Decision & {
  /**
   * Settles every admitted stage of this request at the actual cost (see
   * `Reservation.settle`): once per request; the rules' `actualCost` then do not run.
   * Resolves at once when nothing was reserved (a skipped or dry-run request).
   */
  settle(actual: number): Promise<void>;
};

/**
 * The request's decision as the pipeline exposes it (`req.rateLimit`): the decision's own
 * fields, and `settle` on the class, so nothing is defined per request. Its admitted stage
 * (if any) is kept in private fields, and the request's earlier stages through the decision
 * it was merged with: a request records no reservation of its own, one allocation in all.
 */
class RequestDecision implements Decision {
  allowed: boolean;
  delayMs: number;
  retryAfterMs: number;
  rejectedBy: string[];
  dryRunRejectedBy: string[];
  rules: Decision['rules'];
  at: number;
  declare degraded?: NonNullable<Decision['degraded']>;
  /** The decision shown (see `shownDecision`). */
  readonly #of: Decision;
  /** This stage's admitted decision and its limiter's engine (undefined: it reserved nothing). */
  readonly #d: Decision | undefined;
  readonly #engine: ReservationEngine | undefined;
  /** The request's decision before this stage. */
  readonly #earlier: RequestDecision | undefined;
  #settled = false;

  constructor(all: Decision, d: Decision | undefined, engine: ReservationEngine | undefined, earlier: RequestDecision | undefined) {
    this.allowed = all.allowed;
    this.delayMs = all.delayMs;
    this.retryAfterMs = all.retryAfterMs;
    this.rejectedBy = all.rejectedBy;
    this.dryRunRejectedBy = all.dryRunRejectedBy;
    this.rules = all.rules;
    this.at = all.at;
    if (all.degraded !== undefined) this.degraded = all.degraded;
    this.#of = all;
    this.#d = d;
    this.#engine = engine;
    this.#earlier = earlier;
  }

  /**
   * Settles every admitted stage of this request at the actual cost (see
   * `Reservation.settle`): once per request; the rules' `actualCost` then do not run.
   * Resolves at once when nothing was reserved (a skipped, refused or dry-run request).
   */
  settle(actual: number): Promise<void> {
    if (this.#settled) return Promise.reject(alreadySettled());
    const stages: [Decision, ReservationEngine][] = [];
    for (let x: RequestDecision | undefined = this; x !== undefined; x = x.#earlier) {
      if (x.#d !== undefined) stages.push([x.#d, x.#engine as ReservationEngine]);
    }
    try {
      // Validated first: a bad cost leaves every stage open at its estimate.
      for (const [d, engine] of stages) for (const op of engine.opsOf(d)) actualUnits(actual, op.rule);
    } catch (err) {
      return Promise.reject(err);
    }
    this.#settled = true;
    return Promise.all(stages.map(([d, engine]) => settleDecision(d, engine, () => actual))).then(() => undefined);
  }

  /** Whether `x` is a request's decision whose handler has settled it. */
  static settled(x: unknown): boolean {
    return x instanceof RequestDecision && x.#settled;
  }

  /** The decision `x` shows: the merged decision it was made from, or `x` itself. */
  static shown(x: Decision | undefined): Decision | undefined {
    return x instanceof RequestDecision ? x.#of : x;
  }

  /** `x` when it is a request's decision. */
  static of(x: Decision | undefined): RequestDecision | undefined {
    return x instanceof RequestDecision ? x : undefined;
  }
}

/**
 * The request's decision to expose once a stage has decided: `all` (the stage's decision
 * merged with the earlier ones, `earlier`), with `settle` over every admitted stage; `d`,
 * when given, is this stage's admitted decision.
 */
export function requestDecision(
  all: Decision,
  earlier: Decision | undefined,
  d: Decision | undefined,
  engine: ReservationEngine,
): RequestRateLimit {
  return new RequestDecision(all, d, d === undefined ? undefined : engine, RequestDecision.of(earlier));
}

/** The decision a request's decision was made from (for comparing it with a stage's own). */
export const shownDecision = RequestDecision.shown;

/**
 * The pipeline's part for one stack whose rules declare `actualCost`: `admitted(req, res, d)`
 * settles those rules of an admitted decision when the port says the response finished,
 * unless the handler settled the request itself. A callback that throws, rejects or gives a
 * bad cost, and a store that fails, leave the estimate and are published on
 * `tollgate:store-error` under `name` (the response is already answered). Undefined when no
 * rule declares `actualCost`: such a request does nothing here.
 */
export function actualCosts<Req, Res>(
  lim: Limiter<Req>,
  name: string,
  port: Pick<HttpPort<Req, Res, unknown>, 'onFinish' | 'handlerResponse' | 'locals'>,
): ((req: Req, res: Res, d: Decision) => void) | undefined {
  const engine = reservationEngine(lim) as ReservationEngine;
  const actual = new Map<string, (req: Req, res: unknown) => unknown>();
  for (const c of [...lim.rules, ...Object.values(lim.tiers ?? {}).flat()]) {
    if (c.source.actualCost !== undefined) actual.set(c.spec.name, c.source.actualCost);
  }
  if (actual.size === 0) return undefined;
  const localsOf = localsOn(port as HttpPort<Req, Res, unknown>);
  return (req, res, d) => {
    port.onFinish(req, res, () => {
      if (RequestDecision.settled(localsOf(req).rateLimit)) return;
      const handlersRes = port.handlerResponse ? port.handlerResponse(req, res) : res;
      onFinish(req, handlersRes, d, engine, actual).catch((err: unknown) => publishStoreError(err, req, name, 'allow'));
    });
  };
}

/** The rules' actual costs (awaited together), then one settle of the decision. */
async function onFinish<Req>(
  req: Req,
  res: unknown,
  d: Decision,
  engine: ReservationEngine,
  actual: ReadonlyMap<string, (req: Req, res: unknown) => unknown>,
): Promise<void> {
  const values = new Map<string, unknown>();
  const pending: Promise<void>[] = [];
  for (const op of engine.opsOf(d)) {
    const fn = actual.get(op.rule.name);
    if (fn === undefined) continue;
    const v = fn(req, res);
    if (isThenable(v)) pending.push(Promise.resolve(v).then((x) => void values.set(op.rule.name, x)));
    else values.set(op.rule.name, v);
  }
  await Promise.all(pending);
  // A rule's function that gave nothing (undefined) is a bad cost, not a skip: never a bypass.
  await settleDecision(d, engine, (op) => (actual.has(op.rule.name) ? (values.get(op.rule.name) ?? Number.NaN) : undefined));
}
