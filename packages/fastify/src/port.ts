/**
 * The Fastify port of the request pipeline (`@tollgate/core/http`): headers through
 * `reply.header` (names lower-cased once and cached, as Fastify stores them), the answer
 * through `reply.send`, continuation and failure through the hook's `done`.
 */
import { type HttpPort, lowerHeaderName as lower } from '@tollgate/core/http';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

export const fastifyPort: HttpPort<FastifyRequest, FastifyReply, HookHandlerDoneFunction> = {
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
  send: (reply, status, contentType, body) => {
    reply.code(status).type(contentType).send(body);
  },
  pass: (done) => done(),
  fail: (done, err) => done(err instanceof Error ? err : new Error(String(err))),
};
