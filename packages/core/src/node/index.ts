/**
 * @tollgate/core/node — the Node implementations of the framework port's reading and
 * lifetime operations and of pacing a response body (`limitRate`), shared by every port
 * whose framework runs on Node's `http` (Express, Fastify, node, Koa, NestJS): the client address from the socket, headers
 * from `req.headers`, "finished" on the response's `finish`, "gone" on `close` of the
 * response, the request or the connection. A port spreads `nodeOperations(rawReq, rawRes)`
 * (how to reach Node's request and response behind its own) and adds its headers, send and
 * continuation; `nodePort` is the whole port of a framework whose objects are Node's own,
 * `replyPort` that of a Fastify-style reply over Node's response.
 * @example export const koaPort = { ...nodeOperations((ctx) => ctx.req, (ctx) => ctx.res), name: 'koa', ... }
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpPort } from '../http/port.js';
import { lowerHeaderName } from '../http/port.js';
import { nodeReader } from '../keys.js';
import { isGone, onceOver, whenGone } from './lifetime.js';
import { paceResponse } from './pace.js';

export { isGone, onceOver, untilOver, whenGone } from './lifetime.js';
export { type PaceState, paceResponse } from './pace.js';

/** The continuation of the node adapter and of connect-style middleware. */
export type NodeNext = (err?: unknown) => void;

/** The port operations Node implements for every Node-based framework. */
export type NodeOperations<Req, Res> = Pick<
  HttpPort<Req, Res, never>,
  'peerAddress' | 'header' | 'connection' | 'onFinish' | 'onceOver' | 'whenGone' | 'isGone'
> &
  Required<Pick<HttpPort<Req, Res, never>, 'paceBody' | 'headersSent' | 'cutOff'>>;

/**
 * The reading and lifetime operations of a port over Node's `http`, given how to reach
 * Node's request and response behind the framework's (the identity for Express and node,
 * `request.raw` / `reply.raw` for Fastify). The request itself is read as Node's shape
 * (`socket`, `headers`), which Express' and Fastify's requests have too.
 * @example const ops = nodeOperations<FastifyRequest, FastifyReply>((request) => request.raw, (reply) => reply.raw)
 */
export function nodeOperations<Req, Res>(
  rawRequest: (req: Req) => IncomingMessage,
  rawResponse: (res: Res) => ServerResponse,
): NodeOperations<Req, Res> {
  const reader = nodeReader as unknown as NodeOperations<Req, Res>;
  return {
    // The key functions' default reader: the pipeline leaves no reader on these requests.
    peerAddress: reader.peerAddress,
    header: reader.header,
    connection: reader.connection as NonNullable<NodeOperations<Req, Res>['connection']>,
    onFinish(_req, res, fn) {
      const out = rawResponse(res);
      // `finish` fires once per response sent in full, for streamed and hijacked ones too.
      out.once('finish', () => fn(out.statusCode));
    },
    onceOver: (req, res, fn) => onceOver(rawRequest(req), rawResponse(res), fn),
    whenGone: (req, res, fn) => whenGone(rawRequest(req), rawResponse(res), fn),
    isGone: (req, res) => isGone(rawRequest(req), rawResponse(res)),
    paceBody(req, res, grant, after) {
      paceResponse(rawRequest(req), rawResponse(res), grant, after);
    },
    headersSent: (res) => rawResponse(res).headersSent === true,
    cutOff: (res) => {
      rawResponse(res).destroy();
    },
  };
}

const same = <T>(x: T): T => x;

/**
 * The port of a framework whose request and response are Node's own (node:http, and
 * Express, whose `req`/`res` extend them). Express adds its `trust proxy` reading.
 */
export const nodePort: HttpPort<IncomingMessage, ServerResponse, NodeNext> = {
  name: 'node',
  ...nodeOperations<IncomingMessage, ServerResponse>(same, same),
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

// The port of a framework whose reply wraps Node's response the way Fastify's does
// (`request.raw`, `reply.raw`, `reply.header`, `reply.code`, `reply.type`, `reply.send`):
// Fastify itself, and NestJS on its Fastify platform; structural, so core names no framework.

/** A request that wraps Node's (`request.raw`). */
export interface RawRequestHolder {
  readonly raw: IncomingMessage;
}

/** The parts of a Fastify-style reply the pipeline uses. */
export interface ReplyLike {
  readonly raw: ServerResponse;
  getHeader(name: string): unknown;
  header(name: string, value: string): unknown;
  code(status: number): ReplyLike;
  type(contentType: string): ReplyLike;
  send(payload: Buffer): unknown;
}

/** A hook's continuation: called bare to go on, with an error to fail. */
export type DoneLike = (err?: Error) => void;

/** Headers through `reply.header` (names lower-cased, as Fastify stores them), the answer through `reply.send`. */
export const replyPort: HttpPort<RawRequestHolder, ReplyLike, DoneLike> = {
  name: 'fastify',
  ...nodeOperations<RawRequestHolder, ReplyLike>(
    (request) => request.raw,
    (reply) => reply.raw,
  ),
  getHeader: (reply, name) => reply.getHeader(lowerHeaderName(name)),
  setHeader: (reply, name, value) => {
    reply.header(lowerHeaderName(name), value);
  },
  status: (reply, code) => {
    reply.code(code);
  },
  // Bytes, not a string: Fastify appends `; charset=utf-8` to a JSON type sent as a string,
  // and every port sends core's Content-Type as it is (`application/problem+json`).
  send: (reply, status, contentType, body) => {
    reply.code(status).type(contentType).send(Buffer.from(body));
  },
  pass: (done) => done(),
  fail: (done, err) => done(err instanceof Error ? err : new Error(String(err))),
};
