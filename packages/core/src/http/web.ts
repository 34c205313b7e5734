/**
 * Request lifetimes over Web `Request`/`Response` (any runtime), for ports whose
 * middleware passes on with `await next()` and answers by returning a `Response` (Hono):
 * - "finished" is when the response's body has been read to its end (at once for a
 *   response without one), with its status;
 * - "gone" is the request's abort signal, or the cancellation of the response's body.
 *
 * Several middlewares of one request share one exchange, kept on the request: the
 * outermost opened it and ends it, since it resumes last, with the response the client gets.
 */
import type { HttpPort } from './port.js';

/** What a request's middlewares follow together. */
interface Exchange {
  finish: Array<(status: number) => void>;
  over: Set<() => void>;
  ended: boolean;
  /** How the middleware running now answers with a `Response` (a refusal). */
  answer: ((res: Response) => void) | undefined;
}

const EXCHANGE = Symbol.for('tollgate.web.exchange');
type Carrier = { [EXCHANGE]?: Exchange };

/** The lifetime operations of a Web port, and what its middleware calls around `next()`. */
export interface WebLifetime<Req> extends Pick<HttpPort<Req, unknown, never>, 'onFinish' | 'onceOver' | 'whenGone' | 'isGone'> {
  /** Opens the request's exchange (or joins it); `answer` is how this middleware answers. True when it opened it. */
  enter(req: Req, answer: (res: Response) => void): boolean;
  /** Answers the request with `res` through the middleware running now. */
  answer(req: Req, res: Response): void;
  /** For the middleware that opened the exchange: the response to hand on, its end followed. */
  follow(req: Req, res: Response): Response;
  /** Ends the exchange at once: `status` for a response sent, `undefined` for none (an error). */
  end(req: Req, status: number | undefined): void;
}

function close(ex: Exchange, status: number | undefined): void {
  if (ex.ended) return;
  ex.ended = true;
  if (status !== undefined) for (const fn of ex.finish) fn(status);
  for (const fn of [...ex.over]) fn();
}

/** `body` read through, calling `done(true)` at its end, `done(false)` when it fails or is cancelled. */
function watched(body: ReadableStream<Uint8Array>, done: (complete: boolean) => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const { done: last, value } = await reader.read();
        if (!last) return ctrl.enqueue(value);
        ctrl.close();
        done(true);
      } catch (err) {
        ctrl.error(err);
        done(false);
      }
    },
    cancel(reason) {
      done(false);
      return reader.cancel(reason);
    },
  });
}

/** How a runtime says the client left, where it has a better way than the abort signal (Node's events). */
export type GoneOverride<Req> = Pick<WebLifetime<Req>, 'isGone' | 'whenGone'>;

/**
 * The Web lifetime of a port whose requests give their abort signal with `signalOf`;
 * `native(req)`, when given and it returns operations, says "gone" for that request instead.
 * @example const life = webLifetime<Context>((c) => c.req.raw.signal)
 */
export function webLifetime<Req>(
  signalOf: (req: Req) => AbortSignal | undefined,
  native?: (req: Req) => GoneOverride<Req> | undefined,
): WebLifetime<Req> {
  const exchangeOf = (req: Req): Exchange => {
    const carrier = req as Carrier;
    carrier[EXCHANGE] ??= { finish: [], over: new Set(), ended: false, answer: undefined };
    return carrier[EXCHANGE];
  };
  const isGone = (req: Req, res: unknown): boolean => {
    const n = native?.(req);
    return n === undefined ? signalOf(req)?.aborted === true : n.isGone(req, res);
  };
  const whenGone = (req: Req, res: unknown, fn: () => void): (() => void) => {
    const n = native?.(req);
    if (n !== undefined) return n.whenGone(req, res, fn);
    const signal = signalOf(req);
    if (signal === undefined) return () => {};
    signal.addEventListener('abort', fn, { once: true });
    return () => signal.removeEventListener('abort', fn);
  };
  const life: WebLifetime<Req> = {
    enter(req, answer) {
      const opened = (req as Carrier)[EXCHANGE] === undefined;
      exchangeOf(req).answer = answer;
      return opened;
    },
    answer: (req, res) => exchangeOf(req).answer?.(res),
    follow(req, res) {
      const ex = exchangeOf(req);
      if (ex.ended || (ex.finish.length === 0 && ex.over.size === 0) || res.body === null) {
        close(ex, res.status);
        return res;
      }
      return new Response(
        watched(res.body, (complete) => close(ex, complete ? res.status : undefined)),
        res,
      );
    },
    end: (req, status) => close(exchangeOf(req), status),
    onFinish: (req, _res, fn) => {
      exchangeOf(req).finish.push(fn);
    },
    onceOver(req, res, fn) {
      const ex = exchangeOf(req);
      if (ex.ended || isGone(req, res)) {
        fn();
        return () => {};
      }
      let done = false;
      const run = () => {
        if (done) return;
        done = true;
        ex.over.delete(run);
        stop();
        fn();
      };
      ex.over.add(run);
      const stop = whenGone(req, res, run);
      return run;
    },
    whenGone,
    isGone,
  };
  return life;
}
