/**
 * When a request is over, from the server's side: its response
 * finished or closed, or the client went away. Node reports a departure on the request
 * and the socket as well as on the response, and not always on the response: when a
 * client pipelines several HTTP/1.1 requests in one write and closes the connection,
 * the queued responses emit neither `finish` nor `close`, while every queued request
 * emits `close`. Slots, in-flight counts and held handlers therefore listen to all three
 * (response `finish`/`close`, request `close`), and run their callback exactly once.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { systemTimers, type Timers } from '../controls/timers.js';

/** True when the response can no longer be delivered: the connection is gone. */
export function isGone(req: IncomingMessage, res: ServerResponse): boolean {
  if (res.writableEnded) return false;
  if (res.destroyed) return true;
  const socket = req.socket as IncomingMessage['socket'] | null;
  return socket !== null && socket !== undefined && socket.destroyed === true;
}

/**
 * Calls `fn` once, when the response finishes or closes or the request closes, whichever
 * comes first. Returns a function that does the same at once (idempotent).
 */
export function onceOver(req: IncomingMessage, res: ServerResponse, fn: () => void): () => void {
  let done = false;
  const run = () => {
    if (done) return;
    done = true;
    res.removeListener('finish', run);
    res.removeListener('close', run);
    req.removeListener('close', run);
    fn();
  };
  // A request already over emits nothing more: run now rather than leak.
  if (res.closed || isGone(req, res)) {
    run();
    return run;
  }
  res.once('finish', run);
  res.once('close', run);
  req.once('close', run);
  return run;
}

/**
 * Waits `ms` before the request may proceed. Resolves `true` when the time has passed,
 * `false` as soon as the client goes away (the timer is then cleared, so the caller must
 * not run the handler). `ms <= 0` resolves `true` at once.
 */
export function holdRequest(req: IncomingMessage, res: ServerResponse, ms: number, timers: Timers = systemTimers): Promise<boolean> {
  if (isGone(req, res)) return Promise.resolve(false);
  if (!(ms > 0)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const gone = () => {
      timers.clearTimeout(handle);
      off();
      resolve(false);
    };
    const off = () => {
      res.removeListener('close', gone);
      req.removeListener('close', gone);
    };
    const handle = timers.setTimeout(() => {
      off();
      resolve(true);
    }, ms);
    res.once('close', gone);
    req.once('close', gone);
  });
}

/**
 * Calls `fn` if the client goes away (the response or the request closes) before the
 * returned cancel function is called.
 */
export function whenGone(req: IncomingMessage, res: ServerResponse, fn: () => void): () => void {
  const gone = () => {
    off();
    fn();
  };
  const off = () => {
    res.removeListener('close', gone);
    req.removeListener('close', gone);
  };
  res.once('close', gone);
  req.once('close', gone);
  return off;
}
