/**
 * The port of a framework whose reply wraps Node's response the way Fastify's does
 * (`reply.raw`, `reply.header`, `reply.code`, `reply.type`, `reply.send`): Fastify itself,
 * and NestJS on its Fastify platform. Structural, so core names no framework.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type HttpPort, lowerHeaderName as lower } from './port.js';

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
  rawRequest: (request) => request.raw,
  rawResponse: (reply) => reply.raw,
  getHeader: (reply, name) => reply.getHeader(lower(name)),
  setHeader: (reply, name, value) => {
    reply.header(lower(name), value);
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
