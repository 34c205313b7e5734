/**
 * The Nest port of core's request pipeline: a guard's request and response are the
 * platform's (Express' `req`/`res`, which are Node's, or Fastify's request and reply), so
 * each operation goes to core's port for that shape; the continuation settles the guard's
 * promise.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type HttpPort, nodePort, type ReplyLike, replyPort } from '@tollgate/core/http';
import type { NestNext, NestRequest, NestResponse } from './options.js';

const isReply = (res: NestResponse): res is ReplyLike => typeof res.code === 'function' && typeof res.raw === 'object';
const node = nodePort as HttpPort<unknown, unknown, unknown>;
const reply = replyPort as HttpPort<unknown, unknown, unknown>;
const on = (res: NestResponse) => (isReply(res) ? reply : node);

export const nestPort: HttpPort<NestRequest, NestResponse, NestNext> = {
  name: 'nestjs',
  // Express' `trust proxy` (Fastify's request has no `app`).
  frameworkTrust: (req) => (typeof req.app?.get === 'function' ? req.app.get('trust proxy') : undefined),
  rawRequest: (req) => (req.raw as IncomingMessage | undefined) ?? (req as unknown as IncomingMessage),
  rawResponse: (res) => (isReply(res) ? res.raw : (res as ServerResponse)),
  getHeader: (res, name) => on(res).getHeader(res, name),
  setHeader: (res, name, value) => on(res).setHeader(res, name, value),
  status: (res, code) => on(res).status(res, code),
  send: (res, status, contentType, body) => on(res).send(res, status, contentType, body),
  pass: (next) => next(),
  fail: (next, err) => next(err instanceof Error ? err : new Error(String(err))),
};
