/**
 * The Hono port of core's request pipeline, on Web `Request`/`Response` only (any runtime):
 * - the client address is the runtime's `getConnInfo` (the `connInfo` option), headers are
 *   `c.req.header`;
 * - "finished" is when the response's body has been read to its end (at once for a
 *   response without a body), with its status; "gone" is the request's abort signal or the
 *   body's cancellation, whichever the runtime reports (on Node, Node's own events);
 * - a refusal is a `Response` the middleware returns; passing on is `await next()`.
 *
 * Several tollgate middlewares on one request share one exchange: the outermost follows
 * the final response (it resumes last, when `c.res` is what the client gets).
 */
import { type HttpPort, lowerHeaderName, markAppError } from '@tollgate/core/http';
import { whenGone as nodeGone, isGone as nodeIsGone } from '@tollgate/core/node';
import type { Context } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';

/** How one middleware's run ends: on to the next handler, an answer, or an error. */
export interface HonoNext {
  pass(): void;
  answer(res: Response): void;
  fail(err: unknown): void;
}

/** What a request's tollgate middlewares follow together. */
interface Exchange {
  finish: Array<(status: number) => void>;
  over: Set<() => void>;
  ended: boolean;
  /** The middleware running now: where a refusal is answered. */
  current: HonoNext | undefined;
}

const EXCHANGE = Symbol('tollgate.hono.exchange');
type Carrier = Context & { [EXCHANGE]?: Exchange };

/** The request's exchange, and whether this middleware opened it (then it ends it). */
export function enter(c: Context): { exchange: Exchange; owner: boolean } {
  const held = (c as Carrier)[EXCHANGE];
  if (held !== undefined) return { exchange: held, owner: false };
  const exchange: Exchange = { finish: [], over: new Set(), ended: false, current: undefined };
  (c as Carrier)[EXCHANGE] = exchange;
  return { exchange, owner: true };
}

function exchangeOf(c: Context): Exchange {
  return enter(c).exchange;
}

function end(ex: Exchange, status: number | undefined): void {
  if (ex.ended) return;
  ex.ended = true;
  if (status !== undefined) for (const fn of ex.finish) fn(status);
  for (const fn of [...ex.over]) fn();
}

/**
 * Ends the exchange with the response the client gets: when its body has been read to the
 * end (finished, with its status), or cancelled (over, not finished).
 */
export function follow(c: Context): void {
  const ex = exchangeOf(c);
  const res = c.res;
  if (ex.ended || (ex.finish.length === 0 && ex.over.size === 0) || res.body === null) {
    end(ex, res.status);
    return;
  }
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const { done, value } = await reader.read();
        if (!done) return ctrl.enqueue(value);
        ctrl.close();
        end(ex, res.status);
      } catch (err) {
        ctrl.error(err);
        end(ex, undefined);
      }
    },
    cancel(reason) {
      end(ex, undefined);
      return reader.cancel(reason);
    },
  });
  c.res = new Response(body, res);
}

/** Ends the exchange at once (an answer or an error before any body). */
export function endNow(c: Context, status: number | undefined): void {
  end(exchangeOf(c), status);
}

const signalOf = (c: Context): AbortSignal | undefined => c.req.raw.signal ?? undefined;

type NodeBindings = { incoming: Parameters<typeof nodeGone>[0]; outgoing: Parameters<typeof nodeGone>[1] };

/**
 * Node's request and response under @hono/node-server (`c.env.incoming`, `.outgoing`):
 * there "gone" is Node's (the shared `@tollgate/core/node` lifetimes), since the abort
 * signal misses pipelined requests abandoned with their connection (their responses
 * never close). Type-only use of Node: nothing here loads a Node module.
 */
function nodeBindings(c: Context): NodeBindings | undefined {
  const env = c.env as { incoming?: { once?: unknown }; outgoing?: { once?: unknown } } | undefined;
  if (typeof env?.incoming?.once !== 'function' || typeof env.outgoing?.once !== 'function') return undefined;
  return env as NodeBindings;
}

/**
 * The Hono port, reading the client address with `connInfo` (the runtime's
 * `getConnInfo`); without it the address is unknown.
 */
export function honoPort(connInfo: GetConnInfo | undefined): HttpPort<Context, Context, HonoNext> {
  const isGone = (c: Context) => {
    const node = nodeBindings(c);
    return node === undefined ? signalOf(c)?.aborted === true : nodeIsGone(node.incoming, node.outgoing);
  };
  const whenGone = (c: Context, _res: Context, fn: () => void) => {
    const node = nodeBindings(c);
    if (node !== undefined) return nodeGone(node.incoming, node.outgoing, fn);
    const signal = signalOf(c);
    if (signal === undefined) return () => {};
    signal.addEventListener('abort', fn, { once: true });
    return () => signal.removeEventListener('abort', fn);
  };
  return {
    name: 'hono',
    peerAddress(c) {
      if (connInfo === undefined) return undefined;
      try {
        return connInfo(c).remote.address;
      } catch (err) {
        // The app's `connInfo` (e.g. Node's on a runtime without a socket): its error, not the store's.
        throw markAppError(err);
      }
    },
    header: (c, name) => c.req.header(name),
    onFinish: (c, _res, fn) => {
      exchangeOf(c).finish.push(fn);
    },
    onceOver(c, _res, fn) {
      const ex = exchangeOf(c);
      let stop = () => {};
      let done = false;
      const run = () => {
        if (done) return;
        done = true;
        ex.over.delete(run);
        stop();
        fn();
      };
      if (ex.ended || isGone(c)) {
        fn();
        return () => {};
      }
      ex.over.add(run);
      stop = whenGone(c, c, run);
      return run;
    },
    whenGone,
    isGone,
    getHeader: (c, name) => c.res.headers.get(lowerHeaderName(name)) ?? undefined,
    setHeader: (c, name, value) => {
      c.header(name, value);
    },
    status: (c, code) => {
      c.status(code as Parameters<Context['status']>[0]);
    },
    send(c, status, contentType, body) {
      const res = c.newResponse(body, status as 200, { 'Content-Type': contentType });
      exchangeOf(c).current?.answer(res);
    },
    pass: (next) => next.pass(),
    fail: (next, err) => next.fail(err),
  };
}
