/**
 * The Nest port of core's request pipeline: a guard's request and response are the
 * platform's (Express' `req`/`res`, which are Node's, or Fastify's request and reply), so
 * each operation goes to core's Node port for that shape (`@tollgate/core/node`); the
 * continuation settles the guard's promise.
 */
import type { HttpPort } from '@tollgate/core/http';
import { nodePort, type ReplyLike, replyPort } from '@tollgate/core/node';
import type { NestNext, NestRequest, NestResponse } from './options.js';

const isReply = (res: NestResponse): res is ReplyLike => typeof res.code === 'function' && typeof res.raw === 'object';
const node = nodePort as unknown as HttpPort<unknown, unknown, unknown>;
const reply = replyPort as unknown as HttpPort<unknown, unknown, unknown>;
const on = (res: NestResponse) => (isReply(res) ? reply : node);

export const nestPort: HttpPort<NestRequest, NestResponse, NestNext> = {
  name: 'nestjs',
  // Both platforms' requests are read as Node's shape (`socket`, `headers`): core's default reader.
  peerAddress: node.peerAddress,
  header: node.header,
  ...(node.connection ? { connection: node.connection } : {}),
  // Express' `trust proxy` (Fastify's request has no `app`).
  frameworkTrust: (req) => (typeof req.app?.get === 'function' ? req.app.get('trust proxy') : undefined),
  onFinish: (req, res, fn) => on(res).onFinish(req, res, fn),
  onceOver: (req, res, fn) => on(res).onceOver(req, res, fn),
  whenGone: (req, res, fn) => on(res).whenGone(req, res, fn),
  isGone: (req, res) => on(res).isGone(req, res),
  headersSent: (res) => on(res).headersSent?.(res) === true,
  cutOff: (res) => on(res).cutOff?.(res),
  getHeader: (res, name) => on(res).getHeader(res, name),
  setHeader: (res, name, value) => on(res).setHeader(res, name, value),
  status: (res, code) => on(res).status(res, code),
  send: (res, status, contentType, body) => on(res).send(res, status, contentType, body),
  pass: (next) => next(),
  fail: (next, err) => next(err instanceof Error ? err : new Error(String(err))),
};
