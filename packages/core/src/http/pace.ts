/**
 * Pacing a Node response body through a byte grant (`limitRate`). Every port on Node
 * (Express, Fastify's `reply.raw`, plain `node:http`) ends in a `ServerResponse`, so the
 * pacing is written once here: `write` and `end` are wrapped, and the bytes they are given
 * leave in slices as the key's bucket grants them.
 *
 * Bounded: a slice is asked for only while the socket accepts data, and `write` answers
 * `false` whenever something is still queued, with `drain` emitted once the queue is empty
 * and the socket accepts more (Node's own `drain` is held back until then). A source that
 * honours backpressure (`pipe`, `pipeline`, Fastify's stream and Web stream sending) thus
 * hands over one chunk at a time, which stays in memory as it was given (slices are views,
 * nothing is copied). A handler that ignores `write`'s answer gets what Node gives it:
 * its writes wait in order.
 *
 * A client that leaves ends the pacing at once: queued slices are dropped (their write
 * callbacks get `ERR_STREAM_DESTROYED`, as Node's would) and the grant is closed, which
 * frees the key's share. HEAD requests and bodiless statuses (204, 304) are not paced.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ByteGrant } from '../controls/byte-rate.js';
import { onceOver } from './lifetime.js';

type Callback = (err?: Error | null) => void;

interface Piece {
  buf: Buffer;
  off: number;
  cb: Callback | undefined;
}

/** What a pacer saw, for tests and diagnostics. */
export interface PaceState {
  /** Bytes waiting in the pacer (given by the handler, not yet handed to the socket). */
  readonly queued: number;
  /** The response is over (finished, or its client left). */
  readonly over: boolean;
}

function toBuffer(chunk: unknown, encoding: unknown): Buffer | undefined {
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (Buffer.isBuffer(chunk)) return chunk;
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  return undefined;
}

function destroyedError(): Error {
  return Object.assign(new Error('Cannot call write after a stream was destroyed'), { code: 'ERR_STREAM_DESTROYED' });
}

function afterEndError(): Error {
  return Object.assign(new Error('write after end'), { code: 'ERR_STREAM_WRITE_AFTER_END' });
}

/**
 * Paces `res`'s body through `grant`, the first `after` bytes unpaced. Call it before the
 * handler writes. Closes the grant once when the response is over.
 * @example paceResponse(req, res, await limit.open(req), limit.after)
 */
export function paceResponse(req: IncomingMessage, res: ServerResponse, grant: ByteGrant, after: number): PaceState {
  // Node's own methods, called with loose arguments as callers pass them.
  const write = res.write as (chunk: unknown, encoding?: unknown, cb?: unknown) => boolean;
  const end = res.end as (chunk?: unknown, encoding?: unknown, cb?: unknown) => ServerResponse;
  const emit = res.emit;
  const queue: Piece[] = [];
  let queued = 0;
  let unpaced = after;
  let allowance = 0;
  let asking = false;
  let socketFull = false;
  let owesDrain = false;
  let ending: { cb: Callback | undefined } | undefined;
  let sentBody = false;
  let ended = false;
  let over = false;
  let running = false;
  let again = false;
  let bodiless: boolean | undefined;

  const direct = (): boolean => {
    if (over || ended) return true;
    bodiless ??= req.method === 'HEAD' || res.statusCode === 204 || res.statusCode === 304;
    return bodiless;
  };

  function step(): void {
    while (queue.length > 0 && !over) {
      if (socketFull) return;
      const p = queue[0] as Piece;
      const left = p.buf.length - p.off;
      let n = left;
      if (left > 0) {
        if (unpaced > 0) {
          n = Math.min(unpaced, left);
          unpaced -= n;
        } else {
          if (allowance === 0 && !asking) {
            asking = true;
            grant.take(left, (g) => {
              asking = false;
              allowance += g;
              run();
            });
          }
          if (allowance === 0) return;
          n = Math.min(allowance, left);
          allowance -= n;
        }
      }
      const last = n === left;
      const slice = p.off === 0 && last ? p.buf : p.buf.subarray(p.off, p.off + n);
      p.off += n;
      queued -= n;
      if (last) queue.shift();
      sentBody = true;
      if (!write.call(res, slice, last ? p.cb : undefined)) socketFull = true;
    }
    if (over || queue.length > 0 || ended) return;
    if (ending !== undefined) {
      ended = true;
      end.call(res, ending.cb);
      return;
    }
    if (owesDrain && !socketFull) {
      owesDrain = false;
      emit.call(res, 'drain');
    }
  }

  // Re-entrant calls (a grant answered synchronously, a write callback) only mark the loop to go again.
  function run(): void {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        step();
      } while (again);
    } finally {
      running = false;
    }
  }

  function enqueue(buf: Buffer, cb: Callback | undefined): void {
    queue.push({ buf, off: 0, cb });
    queued += buf.length;
    run();
  }

  onceOver(req, res, () => {
    over = true;
    const dropped = queue.splice(0);
    queued = 0;
    const endCb = ended ? undefined : ending?.cb;
    // What the socket never took goes back to the key, then the key's share is freed.
    grant.close(allowance);
    allowance = 0;
    const err = destroyedError();
    for (const p of dropped) if (p.cb !== undefined) process.nextTick(p.cb, err);
    if (endCb !== undefined) process.nextTick(endCb, err);
  });

  res.write = function pacedWrite(this: ServerResponse, chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    if (ending !== undefined && !direct()) {
      // Ended by the handler, its body still leaving: Node's answer to a write after end,
      // given to the callback (never written ahead of the queued body).
      if (typeof cb === 'function') process.nextTick(cb as Callback, afterEndError());
      return false;
    }
    const buf = direct() ? undefined : toBuffer(chunk, encoding);
    // Not ours to pace (over, bodiless, or a value Node itself refuses): Node answers.
    if (buf === undefined || (buf.length === 0 && queue.length === 0)) {
      return write.call(res, chunk, encoding, cb);
    }
    enqueue(buf, typeof cb === 'function' ? (cb as Callback) : undefined);
    if (queue.length === 0 && !socketFull) return true;
    owesDrain = true;
    return false;
  } as ServerResponse['write'];

  res.end = function pacedEnd(this: ServerResponse, chunk?: unknown, encoding?: unknown, cb?: unknown): ServerResponse {
    if (typeof chunk === 'function') {
      cb = chunk;
      chunk = undefined;
    } else if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    const callback = typeof cb === 'function' ? (cb as Callback) : undefined;
    if (ending !== undefined && !direct()) {
      // A second end while the body still leaves: a chunk is a write after end; the callback runs when the response finishes.
      if (chunk !== undefined && chunk !== null) {
        if (callback !== undefined) process.nextTick(callback, afterEndError());
      } else if (callback !== undefined) res.once('finish', () => callback());
      return res;
    }
    const buf = chunk === undefined || chunk === null || direct() ? undefined : toBuffer(chunk, encoding);
    if (direct() || (chunk !== undefined && chunk !== null && buf === undefined)) {
      return end.call(res, chunk, encoding ?? undefined, callback);
    }
    // Node computes Content-Length for a body given whole to `end`; paced, it leaves in
    // several writes, so say it here rather than fall back to chunked encoding.
    if (
      buf !== undefined &&
      !sentBody &&
      queue.length === 0 &&
      !res.headersSent &&
      !res.hasHeader('content-length') &&
      !res.hasHeader('transfer-encoding')
    ) {
      res.setHeader('Content-Length', buf.length);
    }
    ending = { cb: callback };
    if (buf !== undefined && buf.length > 0) enqueue(buf, undefined);
    else run();
    return res;
  } as ServerResponse['end'];

  res.emit = function pacedEmit(this: ServerResponse, event: string | symbol, ...args: unknown[]): boolean {
    if (event !== 'drain' || over) return emit.call(res, event, ...args);
    // The socket drained: go on; listeners hear `drain` from the loop once our queue is empty.
    socketFull = false;
    owesDrain = true;
    run();
    return true;
  } as ServerResponse['emit'];

  return {
    get queued() {
      return queued;
    },
    get over() {
      return over;
    },
  };
}
