/**
 * The Hono port of core's request pipeline, on Web `Request`/`Response` only (any runtime):
 * the client address is the runtime's `getConnInfo` (the `connInfo` option), headers are
 * `c.req.header`, the lifetimes are core's Web ones (`webLifetime`: "finished" when the
 * response's body has been read to its end, "gone" on the request's abort signal or the
 * body's cancellation; under @hono/node-server, Node's own events), a refusal is a
 * `Response` the middleware returns, passing on is `await next()`. `limitRate` paces the
 * response's body as a Web stream (`paceStream`) once the handlers have set it.
 */
import type { ByteGrant } from '@tollgate/core';
import { type GoneOverride, type HttpPort, lowerHeaderName, markAppError, paceStream, webLifetime } from '@tollgate/core/http';
import { isGone, whenGone } from '@tollgate/core/node';
import type { Context } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';

/** How one middleware's run ends: on to the next handler, an answer, or an error. */
export interface HonoNext {
  pass(): void;
  answer(res: Response): void;
  fail(err: unknown): void;
  /** The client left while held: the middleware settles without an answer anyone receives. */
  drop(): void;
}

type NodeBindings = { incoming: Parameters<typeof isGone>[0]; outgoing: Parameters<typeof isGone>[1] };

/**
 * Under @hono/node-server (`c.env.incoming`, `.outgoing`) "gone" is Node's, as on the other
 * Node ports: the abort signal misses pipelined requests abandoned with their connection
 * (their responses never close). Node's types only: nothing here loads a Node module.
 */
function nodeGone(c: Context): GoneOverride<Context> | undefined {
  const env = c.env as Partial<Record<'incoming' | 'outgoing', { once?: unknown }>> | undefined;
  if (typeof env?.incoming?.once !== 'function' || typeof env.outgoing?.once !== 'function') return undefined;
  const { incoming, outgoing } = env as NodeBindings;
  return { isGone: () => isGone(incoming, outgoing), whenGone: (_c, _r, fn) => whenGone(incoming, outgoing, fn) };
}

/** The lifetimes every Hono middleware shares (the request's exchange is kept on the context). */
export const lifetime = webLifetime<Context>((c) => c.req.raw.signal ?? undefined, nodeGone);

const PACE = Symbol('tollgate.hono.pace');
type Paced = { [PACE]?: ((res: Response) => Response) | undefined };

/**
 * The pacing `limitRate`'s stage asked for on `c` (taken, so that only the middleware
 * running now applies it): what to do with the response once its handlers have set it.
 */
export function takePacing(c: Context): ((res: Response) => Response) | undefined {
  const pace = (c as Paced)[PACE];
  if (pace !== undefined) (c as Paced)[PACE] = undefined;
  return pace;
}

/** A body to pace through `grant`: wrapped in `paceStream`; none (or a HEAD request's), the grant closed. */
function pacing(c: Context, grant: ByteGrant, after: number): (res: Response) => Response {
  return (res) => {
    if (res.body === null || c.req.method === 'HEAD') {
      grant.close();
      return res;
    }
    return new Response(paceStream(res.body, grant, after), res);
  };
}

/** The Hono port, reading the client address with `connInfo`; without it the address is unknown. */
export function honoPort(connInfo: GetConnInfo | undefined): HttpPort<Context, Context, HonoNext> {
  return {
    name: 'hono',
    ...lifetime,
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
    getHeader: (c, name) => c.res.headers.get(lowerHeaderName(name)) ?? undefined,
    setHeader: (c, name, value) => {
      c.header(name, value);
    },
    status: (c, code) => {
      c.status(code as Parameters<Context['status']>[0]);
    },
    send: (c, status, contentType, body) => lifetime.answer(c, c.newResponse(body, status as 200, { 'Content-Type': contentType })),
    pass: (next) => next.pass(),
    fail: (next, err) => next.fail(err),
    drop: (next) => next.drop(),
    // The body is not set yet: the middleware wraps it after `await next()` (`takePacing`).
    paceBody: (c, _res, grant, after) => {
      (c as Paced)[PACE] = pacing(c, grant, after);
    },
  };
}
