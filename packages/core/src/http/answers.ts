/**
 * The pipeline's answers, each built once per stack: the rate-limit headers of a decision,
 * the refusal (the app's `onRejected`, `handler` or `message`, else the standard body) and
 * the store-failure policy (`onStoreError`).
 */
import { isAppError } from '../app-errors.js';
import { publishStoreError } from '../diagnostics.js';
import { appendHeaderValue, type HeaderContext } from '../headers.js';
import type { Limiter } from '../limiter.js';
import { isCapacityRefusal, refusal, storeFailureRefusal } from '../response.js';
import type { Decision } from '../types.js';
import { asAny, asMessageBody, call, isThenable, settle } from './callbacks.js';
import type { Callbacks } from './pipeline.js';
import { type HttpPort, refusedAfterHead, sendRefusal, writeRefusalHead } from './port.js';
import type { RateLimitSource } from './rate-limit.js';

/** The next admission time of each rule, where the store told it (see next-admission.ts). */
export type NextMs = readonly (number | undefined)[] | undefined;

const noop = () => {};

/**
 * Writes decision `d`'s headers in the limiter's `format` (`all`: the request's whole
 * decision, `nextMs`: when each rule admits next); an appending field joins what earlier
 * stages wrote unless `fresh`.
 */
export function headerWriter<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  lim: Limiter<Req>,
  o: Pick<RateLimitSource<Req>, 'format' | 'pk'>,
): (req: Req, res: Res, d: Decision, all: Decision, nextMs: NextMs, fresh: boolean) => void {
  const { format, pk } = o;
  return (req, res, d, all, nextMs, fresh) => {
    const f = format as NonNullable<typeof format>;
    let context: HeaderContext | undefined;
    if (pk || all !== d || nextMs !== undefined) {
      context = { all: all.rules };
      if (nextMs !== undefined) context.next = nextMs;
      if (pk) {
        try {
          context.keys = lim.resolve(req).map((op) => op.key);
        } catch {
          // An async key function: the partition key is left out rather than computed twice.
        }
      }
    }
    const fields = f(d.rules, d.at, context);
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i] as (typeof fields)[number];
      let value = field.value;
      if (field.append && !fresh) value = appendHeaderValue(port.getHeader(res, field.name), value);
      port.setHeader(res, field.name, value);
    }
  };
}

/** Answers a refused request: the app's `onRejected` (observed), then `handler`, `message` or the standard body. */
export function refuser<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  o: Pick<RateLimitSource<Req>, 'statusCode' | 'path'>,
  s: Pick<Callbacks<Req, Res, Next>, 'handler' | 'message' | 'onRejected'>,
): (req: Req, res: Res, next: Next, d: Decision) => void {
  const { statusCode } = o;
  const { handler, message, onRejected } = s;
  const checkMessage = asMessageBody(`${o.path}.message`);
  return (req, res, next, d) => {
    const fail = (err: unknown) => port.fail(next, err);
    if (onRejected !== undefined) {
      const r = call(onRejected, req, res, d);
      if (isThenable(r)) Promise.resolve(r).catch(noop);
    }
    // Refused after a handler started the response: counted and reported, the response cut off.
    if (refusedAfterHead(port, res, next)) return;
    const r = refusal(d, { statusCode });
    writeRefusalHead(port, res, r);
    if (handler !== undefined) {
      settle(call(handler, req, res, next, d), asAny, noop, fail);
      return;
    }
    if (message !== undefined && !isCapacityRefusal(d)) {
      settle(call(message, req, d), checkMessage, (body) => port.send(res, r.status, body.contentType, body.text), fail);
      return;
    }
    port.send(res, r.status, r.contentType, JSON.stringify(r.body));
  };
}

/** The store failed: an app's error goes to its error handler, anything else to `onStoreError`. */
export function storeFailure<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  name: string,
  onStoreError: Callbacks<Req, Res, Next>['onStoreError'],
): (req: Req, res: Res, next: Next, err: unknown) => void {
  return (req, res, next, err) => {
    if (isAppError(err)) {
      port.fail(next, err);
      return;
    }
    if (onStoreError === 'allow') {
      publishStoreError(err, req, name, 'allow');
      port.pass(next);
      return;
    }
    if (onStoreError === 'deny') {
      publishStoreError(err, req, name, 'deny');
      // After a handler started the response a 503 cannot be written (it threw ERR_HTTP_HEADERS_SENT): cut off, as a refusal.
      if (!refusedAfterHead(port, res, next)) sendRefusal(port, res, storeFailureRefusal());
      return;
    }
    if (onStoreError === 'error') {
      publishStoreError(err, req, name, 'error');
      port.fail(next, err);
      return;
    }
    publishStoreError(err, req, name, 'custom');
    try {
      settle(call(onStoreError, err, req, res, next), asAny, noop, (e) => port.fail(next, e));
    } catch (thrown) {
      port.fail(next, thrown);
    }
  };
}
