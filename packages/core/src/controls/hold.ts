/**
 * Waiting on behalf of an HTTP request: hold a request for a delay
 * unless its client goes away, and run something exactly once when a response is over.
 *
 * Both adapters hand over Node's `ServerResponse` (Fastify: `reply.raw`), whose `close`
 * event fires when the response has been sent or the connection was lost, whichever
 * comes first; `finish` fires when the last byte was handed to the OS. A response queued
 * behind another on a pipelined connection emits neither when the client leaves, so a
 * Node response is followed through its request and connection too (`../node/lifetime.ts`).
 */
import { holdRequest } from '../http/lifetime.js';
import { type NodeRequest, type NodeResponse, isGone as nodeIsGone, onceOver, whenGone } from '../node/lifetime.js';
import { systemTimers, type Timers } from './timers.js';

/** The parts of a Node `ServerResponse` the controls use. */
export interface ResponseLike {
  once(event: 'close' | 'finish', listener: () => void): unknown;
  removeListener(event: 'close' | 'finish', listener: () => void): unknown;
  readonly writableEnded?: boolean;
  readonly destroyed?: boolean;
  /** True once `close` has been emitted (Node 18+). */
  readonly closed?: boolean;
}

/** Node's lifetimes as the part of a port `holdRequest` uses. */
const nodeLifetimes = { isGone: nodeIsGone, whenGone } as const;

/** Node's request behind a `ServerResponse` (its `req`), when `res` is one. */
export function requestOf(res: ResponseLike): NodeRequest | undefined {
  const req = (res as { req?: unknown }).req as (NodeRequest & { once?: unknown }) | null | undefined;
  return req !== null && typeof req === 'object' && typeof req.once === 'function' ? req : undefined;
}

/** True when the response can no longer be delivered (the connection is gone). */
export function isGone(res: ResponseLike): boolean {
  return res.destroyed === true && res.writableEnded !== true;
}

/**
 * Waits `ms` before the request may proceed. Resolves `true` when the time has passed,
 * `false` as soon as the connection closes first (the timer is then cleared, so the
 * caller must not run the handler). `ms <= 0` resolves `true` at once.
 * @example
 * if (!(await hold(res, decision.delayMs))) return; // client gone: never run the handler
 * next();
 */
export function hold(res: ResponseLike, ms: number, timers: Timers = systemTimers): Promise<boolean> {
  const req = requestOf(res);
  if (req !== undefined) return holdRequest(nodeLifetimes, req, res as NodeResponse, ms, timers);
  if (isGone(res)) return Promise.resolve(false);
  if (!(ms > 0)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onClose = () => {
      timers.clearTimeout(handle);
      resolve(false);
    };
    const handle = timers.setTimeout(() => {
      res.removeListener('close', onClose);
      resolve(true);
    }, ms);
    res.once('close', onClose);
  });
}

/**
 * Calls `fn` exactly once, when the response finishes or its connection closes,
 * whichever comes first. Returns a function that does the same at once (idempotent),
 * for paths that end the request without a response event (e.g. a handler that never
 * starts).
 */
export function onceDone(res: ResponseLike, fn: () => void): () => void {
  const req = requestOf(res);
  if (req !== undefined) return onceOver(req, res as NodeResponse, fn);
  let done = false;
  const run = () => {
    if (done) return;
    done = true;
    res.removeListener('finish', run);
    res.removeListener('close', run);
    fn();
  };
  // A response that already closed will emit nothing more: run now rather than leak.
  if (res.closed === true) {
    run();
    return run;
  }
  res.once('finish', run);
  res.once('close', run);
  return run;
}
