/**
 * The framework port: everything the request pipeline (`./rate-limit.ts`,
 * `./controls.ts`) needs from a web framework, and nothing more. An adapter implements
 * it once, as an object of plain functions over its own request, response and
 * continuation types, and hands it to the pipeline's factories at construction; the
 * pipeline never names Express, Fastify, Node's `http` or any other framework or runtime.
 *
 * - `Req`: the framework's request (Express `Request`, Fastify `FastifyRequest`, Node's
 *   `IncomingMessage`, Hono's `Context`). The pipeline reads the client address and
 *   headers through the port, and leaves `rateLimit` (the combined decision) on it.
 * - `Res`: the framework's response (Express `Response`, Fastify `FastifyReply`, Node's
 *   `ServerResponse`), or whatever the adapter answers through.
 * - `Next`: how the framework continues or fails a request (Express `next`, Fastify's
 *   hook `done`, the node adapter's own callback).
 *
 * The Node implementations of the reading and lifetime operations are shared by every
 * Node-based port: `nodeOperations` and `nodePort` in `@tollgate/core/node`.
 */
import type { ByteGrant } from '../controls/byte-pools.js';
import type { ThrottleResult } from '../controls/throttle.js';
import { appendHeaderValue, type HeaderField } from '../headers.js';
import { nodeReader, REQUEST_READER, type RequestReader } from '../keys.js';
import type { Refusal } from '../response.js';
import type { Decision } from '../types.js';

export interface HttpPort<Req, Res, Next> extends RequestReader<Req> {
  /** The adapter's name in warnings (`express`, `fastify`, `node`). */
  readonly name: string;
  /**
   * The framework's own proxy trust for this request's app (Express' `trust proxy`),
   * when it has one: tollgate warns once when it is set and `trustProxy` is not.
   */
  frameworkTrust?(req: Req): unknown;
  /**
   * Calls `fn` once with the response's status when the response has been sent in full
   * (refunds by outcome, `countIf`); never when it was cut short (the client left).
   */
  onFinish(req: Req, res: Res, fn: (status: number) => void): void;
  /**
   * Calls `fn` once when the request is over: its response finished or closed, or the
   * client went away, whichever comes first (at once when it already is). Returns a
   * function that does the same now (idempotent).
   */
  onceOver(req: Req, res: Res, fn: () => void): () => void;
  /** Calls `fn` if the client goes away before the returned cancel function is called. */
  whenGone(req: Req, res: Res, fn: () => void): () => void;
  /** True when the response can no longer be delivered: the client is gone. */
  isGone(req: Req, res: Res): boolean;
  /**
   * The response as the app's handlers see it, given to a rule's `actualCost` (default: `res`;
   * Koa's is the context).
   */
  handlerResponse?(req: Req, res: Res): unknown;
  /** The current value of a response header, or undefined. */
  getHeader(res: Res, name: string): unknown;
  /** Sets a response header, replacing any earlier value. */
  setHeader(res: Res, name: string, value: string): void;
  /** Sets the response status (before a custom handler answers). */
  status(res: Res, code: number): void;
  /**
   * Sends the whole response: status, content type and body (other headers are already
   * set). The content type goes out exactly as given, with nothing appended (a framework
   * that adds `; charset=utf-8` to a string body is given bytes), so every port sends the
   * same bytes; the scenario suite checks them.
   */
  send(res: Res, status: number, contentType: string, body: string): void;
  /** Lets the request go on to the next middleware, hook or handler. */
  pass(next: Next): void;
  /** Hands an error to the framework's error handler. */
  fail(next: Next, err: unknown): void;
  /**
   * Ends the continuation of a request whose client went away while tollgate held it
   * (delayed, queued): nothing is sent and the handlers never run, but a framework that
   * awaits its middleware (Koa, Hono) must see it settle. Left out where a middleware
   * that neither passes nor answers simply stops (Express, Fastify, node's own watch).
   */
  drop?(next: Next): void;
  /**
   * True when the response's status line and headers have already gone out (a handler
   * before this middleware started streaming): no header or refusal can be written any
   * more. Left out (Hono: a Web `Response` is sent only after the middleware returns): never.
   */
  headersSent?(res: Res): boolean;
  /**
   * Cuts off a response whose head has gone out (destroys it), so that its client sees an
   * incomplete answer rather than a partial body that looks whole. With `headersSent`.
   */
  cutOff?(res: Res): void;
  /**
   * Where the app reads what tollgate keeps for a request (`rateLimit`, the combined
   * decision; `slowDown`, the throttle's figures), when the framework keeps per-request
   * values elsewhere than on its request object (Koa: `ctx.state`). Left out: the request's
   * own properties (`req.rateLimit`). Route stages read the decision back from here.
   */
  locals?(req: Req): RequestLocals;
  /**
   * Paces a response body through a byte grant (`limitRate`), the first `after` bytes
   * unpaced. A Node-based port has it from `nodeOperations` (`@tollgate/core/node`'s
   * `paceResponse`); a port answering with Web `Response`s wraps its body with `paceStream`.
   * Left out, the port cannot run `limitRate`.
   */
  paceBody?(req: Req, res: Res, grant: ByteGrant, after: number): void;
}

/** Ends a held request's continuation when its client left (see {@link HttpPort.drop}). */
export function dropHeld<Req, Res, Next>(port: HttpPort<Req, Res, Next>, next: Next): void {
  port.drop?.(next);
}

/**
 * A refusal for a response whose head has already gone out: the 429 (or 503) cannot be
 * written, so the response is cut off and the continuation ended (the later handlers never
 * run). Returns false when the refusal can be answered as usual.
 */
export function refusedAfterHead<Req, Res, Next>(port: HttpPort<Req, Res, Next>, res: Res, next: Next): boolean {
  if (port.headersSent?.(res) !== true) return false;
  port.cutOff?.(res);
  dropHeld(port, next);
  return true;
}

/** What tollgate keeps for the app on a request (see {@link HttpPort.locals}). */
export interface RequestLocals {
  rateLimit?: Decision | undefined;
  slowDown?: ThrottleResult | undefined;
}

/** A port's {@link HttpPort.locals} as a function: the request itself when the port leaves it out. */
export function localsOf<Req, Res, Next>(port: HttpPort<Req, Res, Next>): (req: Req) => RequestLocals {
  const locals = port.locals;
  return locals === undefined ? (req) => req as RequestLocals : (req) => locals.call(port, req);
}

/**
 * What makes a request readable by the key functions (`ip()`, `header()`, allow and deny
 * lists): nothing for a port that reads requests as Node's shape (the key functions'
 * default), else a function leaving the port on the request as its reader.
 */
export function readerMark<Req>(port: RequestReader<Req>): ((req: Req) => void) | undefined {
  const reader = nodeReader as unknown as RequestReader<Req>;
  if (port.peerAddress === reader.peerAddress && port.header === reader.header) return undefined;
  return (req) => {
    (req as { [REQUEST_READER]?: RequestReader<Req> })[REQUEST_READER] = port;
  };
}

const lowered: Record<string, string> = Object.create(null);

/**
 * A header name in lower case, as Node and Fastify look names up: an already lower-case
 * name is returned as is and others are lowered once and cached, so a lookup makes no
 * new string. The two draft-10 names, written on every decision, are told by identity
 * before the table's lookup by text.
 */
export function lowerHeaderName(name: string): string {
  if (name === 'RateLimit') return 'ratelimit';
  if (name === 'RateLimit-Policy') return 'ratelimit-policy';
  let l = lowered[name];
  if (l === undefined) {
    l = name.toLowerCase();
    // Names come from the configuration (header modes, refusal headers): a handful.
    if (l.length <= 64) lowered[name] = l;
  }
  return l;
}

/** Writes header fields: draft-10 items are appended to what earlier limiters wrote. */
export function writeFields<Req, Res, Next>(port: HttpPort<Req, Res, Next>, res: Res, fields: readonly HeaderField[]): void {
  // The head went out before this middleware ran: nothing can be added to it.
  if (port.headersSent?.(res) === true) return;
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i] as HeaderField;
    port.setHeader(res, f.name, f.append ? appendHeaderValue(port.getHeader(res, f.name), f.value) : f.value);
  }
}

/** Sets a refusal's status and headers (`Retry-After`, `Cache-Control`), without the body. */
export function writeRefusalHead<Req, Res, Next>(port: HttpPort<Req, Res, Next>, res: Res, r: Refusal): void {
  port.status(res, r.status);
  for (const [name, value] of r.headers) port.setHeader(res, name, value);
}

/** Sends a refusal built by core: status, headers and the problem body. */
export function sendRefusal<Req, Res, Next>(port: HttpPort<Req, Res, Next>, res: Res, r: Refusal): void {
  writeRefusalHead(port, res, r);
  port.send(res, r.status, r.contentType, JSON.stringify(r.body));
}
