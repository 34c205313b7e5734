/**
 * The framework port: everything the request pipeline (`./rate-limit.ts`,
 * `./controls.ts`) needs from a web framework, and nothing more. An adapter implements
 * it once, as an object of plain functions over its own request, response and
 * continuation types, and hands it to the pipeline's factories at construction; the
 * pipeline never names Express, Fastify or any other framework.
 *
 * - `Req`: the framework's request (Express `Request`, Fastify `FastifyRequest`, Node's
 *   `IncomingMessage`). The pipeline reads headers and the client address from it
 *   through the key functions, and leaves `rateLimit` (the combined decision) on it.
 * - `Res`: the framework's response (Express `Response`, Fastify `FastifyReply`, Node's
 *   `ServerResponse`).
 * - `Next`: how the framework continues or fails a request (Express `next`, Fastify's
 *   hook `done`, the node adapter's own callback).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ByteGrant } from '../controls/byte-pools.js';
import type { HeaderField } from '../headers.js';
import type { Refusal } from '../response.js';

export interface HttpPort<Req, Res, Next> {
  /** The adapter's name in warnings (`express`, `fastify`, `node`). */
  readonly name: string;
  /**
   * The framework's own proxy trust for this request's app (Express' `trust proxy`),
   * when it has one: tollgate warns once when it is set and `trustProxy` is not.
   */
  frameworkTrust?(req: Req): unknown;
  /** Node's request behind the framework's (for its socket and its `close`). */
  rawRequest(req: Req): IncomingMessage;
  /** Node's response behind the framework's (for `finish` and `close`). */
  rawResponse(res: Res): ServerResponse;
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
   * Paces a response body through a byte grant (`limitRate`), the first `after` bytes
   * unpaced. Ports whose responses are Node's leave it out (the pipeline paces
   * `rawResponse`); a port answering with Web `Response`s wraps its body with `paceStream`.
   */
  paceBody?(req: Req, res: Res, grant: ByteGrant, after: number): void;
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
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i] as HeaderField;
    port.setHeader(res, f.name, f.append ? appendValue(port.getHeader(res, f.name), f.value) : f.value);
  }
}

function appendValue(existing: unknown, value: string): string {
  if (existing === undefined || existing === null || existing === '') return value;
  const prior = Array.isArray(existing) ? existing.join(', ') : String(existing);
  return prior === '' ? value : `${prior}, ${value}`;
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

/** The continuation of the node adapter and of connect-style middleware. */
export type NodeNext = (err?: unknown) => void;

/**
 * The port of a framework whose request and response are Node's own (node:http, and
 * Express, whose `req`/`res` extend them). Express adds its `trust proxy` reading.
 */
export const nodePort: HttpPort<IncomingMessage, ServerResponse, NodeNext> = {
  name: 'node',
  rawRequest: (req) => req,
  rawResponse: (res) => res,
  // Node lowers the name it looks up: given lowered, it makes no new string per lookup.
  getHeader: (res, name) => res.getHeader(lowerHeaderName(name)),
  setHeader: (res, name, value) => {
    res.setHeader(name, value);
  },
  status: (res, code) => {
    res.statusCode = code;
  },
  send(res, status, contentType, body) {
    res.statusCode = status;
    res.setHeader('Content-Type', contentType);
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(body);
  },
  pass: (next) => next(),
  fail: (next, err) => next(err),
};
