/**
 * The per-request path of one limiter in a Fastify hook: skip? → one
 * store decision → `request.rateLimit` → headers (draft-10 items appended to what
 * earlier limiters wrote) → diagnostics → `done()`, a hold (leaky-bucket queue), or
 * the refusal. Everything here is built once per (registration, route stack) at route
 * registration; a request only calls functions that already exist.
 *
 * Deciding is the core limiter's; keys, headers, refusal bodies and diagnostics come
 * from core, so the answers are the Express adapter's, byte for byte.
 */
import {
  appendHeaderValue,
  countedRules,
  type Decision,
  hold,
  isAppError,
  isCapacityRefusal,
  type Limiter,
  mergeDecisions,
  messageContentType,
  messageText,
  nextAdmission,
  publishDecision,
  publishStoreError,
  type Refusal,
  refundUncountedOnFinish,
  refusal,
  storeFailureRefusal,
  systemTimers,
} from '@tollgate/core';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Normalised } from './options.js';

/** A decision hook in Fastify's callback style (`onRequest`, `preValidation`, `preHandler`). */
export type Decide = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;

function writeRefusal(reply: FastifyReply, r: Refusal): void {
  reply.code(r.status);
  for (const [name, value] of r.headers) reply.header(name, value);
}

const lowered: Record<string, string> = Object.create(null);

/**
 * Header names as Fastify stores them. `reply.header` and `getHeader` lower-case every
 * name they get; an already lower-case name is returned as is, without a new string.
 */
function lowerName(name: string): string {
  let l = lowered[name];
  if (l === undefined) {
    l = name.toLowerCase();
    lowered[name] = l;
  }
  return l;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/** Builds the decision hook for one limiter (a plugin-level stack, or it plus a route's rules). */
export function decider(lim: Limiter<FastifyRequest>, o: Normalised): Decide {
  const { format, pk, dryRun, name, handler, message, onRejected, statusCode, onStoreError, skip } = o;
  const timers = o.timers ?? systemTimers;
  const counted = countedRules(lim);
  const firstUnit = nextAdmission(lim);

  function headers(
    request: FastifyRequest,
    reply: FastifyReply,
    d: Decision,
    all: Decision,
    nextMs?: readonly (number | undefined)[],
  ): void {
    const f = format as NonNullable<Normalised['format']>;
    const fields = pk
      ? f(d.rules, d.at, { all: all.rules, keys: lim.resolve(request).map((op) => op.key), ...(nextMs ? { next: nextMs } : {}) })
      : f(d.rules, d.at, all === d && !nextMs ? undefined : { all: all.rules, ...(nextMs ? { next: nextMs } : {}) });
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i] as (typeof fields)[number];
      const lower = lowerName(field.name);
      reply.header(lower, field.append ? appendHeaderValue(reply.getHeader(lower), field.value) : field.value);
    }
  }

  function sendBody(reply: FastifyReply, contentType: string, body: string): void {
    reply.type(contentType).send(body);
  }

  function refuse(request: FastifyRequest, reply: FastifyReply, d: Decision): void {
    onRejected?.(request, reply, d);
    const r = refusal(d, { statusCode });
    writeRefusal(reply, r);
    if (handler !== undefined) {
      handler(request, reply, d);
      return;
    }
    if (message !== undefined && !isCapacityRefusal(d)) {
      const body = message(request, d);
      sendBody(reply, messageContentType(body), messageText(body));
      return;
    }
    sendBody(reply, r.contentType, JSON.stringify(r.body));
  }

  function decided(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, d: Decision): void {
    const all = mergeDecisions(request.rateLimit, d);
    request.rateLimit = all;
    if (format !== undefined && firstUnit.needed(d)) {
      // Rare (a rule just ran dry): ask the store when its next unit comes, for an exact `t`.
      firstUnit.get(request, d).then(
        (nextMs) => answer(request, reply, done, d, all, nextMs),
        (err) => {
          publishStoreError(err, request, name, 'allow');
          answer(request, reply, done, d, all, undefined);
        },
      );
      return;
    }
    answer(request, reply, done, d, all, undefined);
  }

  function answer(
    request: FastifyRequest,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
    d: Decision,
    all: Decision,
    nextMs: readonly (number | undefined)[] | undefined,
  ): void {
    if (format !== undefined) headers(request, reply, d, all, nextMs);
    publishDecision(d, request, name, dryRun);
    if (d.allowed || dryRun) {
      // Node's response, not a Fastify hook: `finish` also fires for hijacked replies and streams.
      if (d.allowed && counted.length > 0) refundUncountedOnFinish(lim, counted, request, reply.raw, d, name);
      if (d.delayMs > 0 && !dryRun) {
        // Held until its departure; a client that leaves while waiting never reaches the handler.
        hold(reply.raw, d.delayMs, timers).then((stillThere) => {
          if (stillThere) done();
        });
        return;
      }
      done();
      return;
    }
    try {
      refuse(request, reply, d);
    } catch (err) {
      // A throwing handler, onRejected or message function is an app bug: Fastify's error handler gets it.
      done(asError(err));
    }
  }

  function failed(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction, err: unknown): void {
    if (isAppError(err)) {
      done(asError(err));
      return;
    }
    if (onStoreError === 'allow') {
      publishStoreError(err, request, name, 'allow');
      done();
      return;
    }
    if (onStoreError === 'deny') {
      publishStoreError(err, request, name, 'deny');
      const r = storeFailureRefusal();
      writeRefusal(reply, r);
      sendBody(reply, r.contentType, JSON.stringify(r.body));
      return;
    }
    if (onStoreError === 'error') {
      publishStoreError(err, request, name, 'error');
      done(asError(err));
      return;
    }
    publishStoreError(err, request, name, 'custom');
    try {
      onStoreError(err, request, reply, done);
    } catch (thrown) {
      done(asError(thrown));
    }
  }

  function run(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    let d: Decision | undefined;
    try {
      // An in-process store (MemoryStore) decides in this tick: no promise, no closure.
      d = lim.consumeSync(request);
    } catch (err) {
      failed(request, reply, done, err);
      return;
    }
    if (d !== undefined) {
      decided(request, reply, done, d);
      return;
    }
    lim.consume(request).then(
      (d) => decided(request, reply, done, d),
      (err) => failed(request, reply, done, err),
    );
  }

  if (skip === undefined) return run;

  return function decideUnlessSkipped(request, reply, done): void {
    let result: boolean | Promise<boolean>;
    try {
      result = skip(request, reply);
    } catch (err) {
      done(asError(err));
      return;
    }
    if (result === true) done();
    else if (result === false) run(request, reply, done);
    else
      Promise.resolve(result).then(
        (v) => (v === true ? done() : run(request, reply, done)),
        (err) => done(asError(err)),
      );
  };
}
