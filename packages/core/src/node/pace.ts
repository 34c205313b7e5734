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

type NodeWrite = (chunk: unknown, encoding?: unknown, cb?: unknown) => boolean;
type NodeEnd = (chunk?: unknown, encoding?: unknown, cb?: unknown) => ServerResponse;

/** One paced response: the queue of what the handler gave, and the loop that lets it out. */
class Pacer implements PaceState {
  // Node's own methods, called with loose arguments as callers pass them.
  readonly #write: NodeWrite;
  readonly #end: NodeEnd;
  readonly #emit: ServerResponse['emit'];
  readonly #queue: Piece[] = [];
  #queued = 0;
  #unpaced: number;
  #allowance = 0;
  #asking = false;
  #socketFull = false;
  #owesDrain = false;
  #ending: { cb: Callback | undefined } | undefined;
  #sentBody = false;
  #ended = false;
  #over = false;
  #running = false;
  #again = false;
  #bodiless: boolean | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly grant: ByteGrant,
    after: number,
  ) {
    this.#write = res.write as NodeWrite;
    this.#end = res.end as NodeEnd;
    this.#emit = res.emit;
    this.#unpaced = after;
  }

  get queued(): number {
    return this.#queued;
  }

  get over(): boolean {
    return this.#over;
  }

  /** Not ours to pace: over, ended, or a response without a body. */
  #direct(): boolean {
    if (this.#over || this.#ended) return true;
    this.#bodiless ??= this.req.method === 'HEAD' || this.res.statusCode === 204 || this.res.statusCode === 304;
    return this.#bodiless;
  }

  /** How many bytes of `left` may leave now (0: a grant is awaited). */
  #allowed(left: number): number {
    if (this.#unpaced > 0) {
      const n = Math.min(this.#unpaced, left);
      this.#unpaced -= n;
      return n;
    }
    if (this.#allowance === 0 && !this.#asking) {
      this.#asking = true;
      this.grant.take(left, (g) => {
        this.#asking = false;
        this.#allowance += g;
        this.#run();
      });
    }
    const n = Math.min(this.#allowance, left);
    this.#allowance -= n;
    return n;
  }

  #step(): void {
    const queue = this.#queue;
    while (queue.length > 0 && !this.#over) {
      if (this.#socketFull) return;
      const p = queue[0] as Piece;
      const left = p.buf.length - p.off;
      const n = left > 0 ? this.#allowed(left) : 0;
      if (left > 0 && n === 0) return;
      const last = n === left;
      const slice = p.off === 0 && last ? p.buf : p.buf.subarray(p.off, p.off + n);
      p.off += n;
      this.#queued -= n;
      if (last) queue.shift();
      this.#sentBody = true;
      if (!this.#write.call(this.res, slice, last ? p.cb : undefined)) this.#socketFull = true;
    }
    if (this.#over || queue.length > 0 || this.#ended) return;
    if (this.#ending !== undefined) {
      this.#ended = true;
      this.#end.call(this.res, this.#ending.cb);
      return;
    }
    if (this.#owesDrain && !this.#socketFull) {
      this.#owesDrain = false;
      this.#emit.call(this.res, 'drain');
    }
  }

  // Re-entrant calls (a grant answered synchronously, a write callback) only mark the loop to go again.
  #run(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    try {
      do {
        this.#again = false;
        this.#step();
      } while (this.#again);
    } finally {
      this.#running = false;
    }
  }

  #enqueue(buf: Buffer, cb: Callback | undefined): void {
    this.#queue.push({ buf, off: 0, cb });
    this.#queued += buf.length;
    this.#run();
  }

  /** The response is over (finished, or the client left). */
  stop(): void {
    this.#over = true;
    const dropped = this.#queue.splice(0);
    this.#queued = 0;
    const endCb = this.#ended ? undefined : this.#ending?.cb;
    // What the socket never took goes back to the key, then the key's share is freed.
    this.grant.close(this.#allowance);
    this.#allowance = 0;
    const err = destroyedError();
    for (const p of dropped) if (p.cb !== undefined) process.nextTick(p.cb, err);
    if (endCb !== undefined) process.nextTick(endCb, err);
  }

  write(chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    if (this.#ending !== undefined && !this.#direct()) {
      // Ended by the handler, its body still leaving: Node's answer to a write after end,
      // given to the callback (never written ahead of the queued body).
      if (typeof cb === 'function') process.nextTick(cb as Callback, afterEndError());
      return false;
    }
    const buf = this.#direct() ? undefined : toBuffer(chunk, encoding);
    // Not ours to pace (over, bodiless, or a value Node itself refuses): Node answers.
    if (buf === undefined || (buf.length === 0 && this.#queue.length === 0)) return this.#write.call(this.res, chunk, encoding, cb);
    this.#enqueue(buf, typeof cb === 'function' ? (cb as Callback) : undefined);
    if (this.#queue.length === 0 && !this.#socketFull) return true;
    this.#owesDrain = true;
    return false;
  }

  end(chunk?: unknown, encoding?: unknown, cb?: unknown): ServerResponse {
    if (typeof chunk === 'function') {
      cb = chunk;
      chunk = undefined;
    } else if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    const res = this.res;
    const callback = typeof cb === 'function' ? (cb as Callback) : undefined;
    const given = chunk !== undefined && chunk !== null;
    if (this.#ending !== undefined && !this.#direct()) {
      // A second end while the body still leaves: a chunk is a write after end; the callback runs when the response finishes.
      if (given) {
        if (callback !== undefined) process.nextTick(callback, afterEndError());
      } else if (callback !== undefined) res.once('finish', () => callback());
      return res;
    }
    const buf = !given || this.#direct() ? undefined : toBuffer(chunk, encoding);
    if (this.#direct() || (given && buf === undefined)) return this.#end.call(res, chunk, encoding ?? undefined, callback);
    // Node computes Content-Length for a body given whole to `end`; paced, it leaves in
    // several writes, so say it here rather than fall back to chunked encoding.
    if (
      buf !== undefined &&
      !this.#sentBody &&
      this.#queue.length === 0 &&
      !res.headersSent &&
      !res.hasHeader('content-length') &&
      !res.hasHeader('transfer-encoding')
    ) {
      res.setHeader('Content-Length', buf.length);
    }
    this.#ending = { cb: callback };
    if (buf !== undefined && buf.length > 0) this.#enqueue(buf, undefined);
    else this.#run();
    return res;
  }

  emit(event: string | symbol, args: unknown[]): boolean {
    if (event !== 'drain' || this.#over) return this.#emit.call(this.res, event, ...args);
    // The socket drained: go on; listeners hear `drain` from the loop once our queue is empty.
    this.#socketFull = false;
    this.#owesDrain = true;
    this.#run();
    return true;
  }
}

/**
 * Paces `res`'s body through `grant`, the first `after` bytes unpaced. Call it before the
 * handler writes. Closes the grant once when the response is over.
 * @example paceResponse(req, res, await limit.open(req), limit.after)
 */
export function paceResponse(req: IncomingMessage, res: ServerResponse, grant: ByteGrant, after: number): PaceState {
  const pacer = new Pacer(req, res, grant, after);
  onceOver(req, res, () => pacer.stop());
  res.write = function pacedWrite(chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    return pacer.write(chunk, encoding, cb);
  } as ServerResponse['write'];
  res.end = function pacedEnd(chunk?: unknown, encoding?: unknown, cb?: unknown): ServerResponse {
    return pacer.end(chunk, encoding, cb);
  } as ServerResponse['end'];
  res.emit = function pacedEmit(event: string | symbol, ...args: unknown[]): boolean {
    return pacer.emit(event, args);
  } as ServerResponse['emit'];
  return pacer;
}
