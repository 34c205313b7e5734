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
import type { HttpPort } from './port.js';

/** `req.rateLimit` as a handler sees it: the request's decision, and its settle. */
export type RequestRateLimit = Decision & {
  /**
   * Settles every admitted stage of this request at the actual cost (see
   * `Reservation.settle`): once per request; the rules' `actualCost` then do not run.
   * Resolves at once when nothing was reserved (a skipped or dry-run request).
   */
  settle(actual: number): Promise<void>;
};

/** What a request carries: its admitted stages and whether the handler has settled them. */
interface Reserved {
  stages: { d: Decision; engine: ReservationEngine }[];
  settled: boolean;
}

// Beside the request, not on it: a new property on Express's re-prototyped `req` takes V8's
// slow path (about 16k instructions per request, docs/benchmarks-history.md).
const RESERVED = new WeakMap<object, Reserved>();

/** The request's reservations, made on its first admitted stage. */
function reservedOf(req: object): Reserved {
  let r = RESERVED.get(req);
  if (r === undefined) {
    r = { stages: [], settled: false };
    RESERVED.set(req, r);
  }
  return r;
}

/** The request's settle: every stage at `actual`, once. */
function settleRequest(r: Reserved, actual: number): Promise<void> {
  if (r.settled) return Promise.reject(alreadySettled());
  try {
    // Validated first: a bad cost leaves every stage open at its estimate.
    for (const s of r.stages) for (const op of s.engine.opsOf(s.d)) actualUnits(actual, op.rule);
  } catch (err) {
    return Promise.reject(err);
  }
  r.settled = true;
  return Promise.all(r.stages.map((s) => settleDecision(s.d, s.engine, () => actual))).then(() => undefined);
}

/**
 * Gives the request's decision (`req.rateLimit`, or where the port keeps it: Koa's
 * `ctx.state`) its `settle`, not enumerable so the decision reads as before.
 */
export function exposeSettle(req: object, locals: { rateLimit?: Decision | undefined }): void {
  const d = locals.rateLimit;
  if (d === undefined || Object.hasOwn(d, 'settle')) return;
  const reserved = reservedOf(req);
  Object.defineProperty(d, 'settle', { value: (actual: number) => settleRequest(reserved, actual), configurable: true });
}

/**
 * The pipeline's part for one stack: `admitted(req, res, d)` records an admitted decision as
 * a reservation of the request and, when some rule declares `actualCost`, settles those rules
 * when the port says the response finished. A callback that throws, rejects or gives a bad cost, and a store that
 * fails, leave the estimate and are published on `tollgate:store-error` under `name` (the
 * response is already answered).
 */
export function reservations<Req, Res>(
  lim: Limiter<Req>,
  name: string,
  port: Pick<HttpPort<Req, Res, unknown>, 'onFinish' | 'handlerResponse'>,
): (req: Req, res: Res, d: Decision) => void {
  const engine = reservationEngine(lim) as ReservationEngine;
  const actual = new Map<string, (req: Req, res: unknown) => unknown>();
  for (const c of [...lim.rules, ...Object.values(lim.tiers ?? {}).flat()]) {
    if (c.source.actualCost !== undefined) actual.set(c.spec.name, c.source.actualCost);
  }
  return (req, res, d) => {
    const reserved = reservedOf(req as object);
    reserved.stages.push({ d, engine });
    if (actual.size === 0) return;
    port.onFinish(req, res, () => {
      if (reserved.settled) return;
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
