/**
 * Node's request lifetimes, shared by every Node-based port (`nodeOperations`): when a
 * request is over, from the server's side: its response
 * finished or closed, or the client went away. Node reports a departure on the request
 * and the socket as well as on the response, and not always on the response: when a
 * client pipelines several HTTP/1.1 requests in one write and closes the connection,
 * the queued responses emit neither `finish` nor `close`, while every queued request
 * emits `close`. Slots, in-flight counts and held handlers therefore listen to all three
 * (response `finish`/`close`, request `close`, the connection's `close`), and run their
 * callback exactly once.
 *
 * A request's `close` alone does not mean the client left: since Node 16 a request emits
 * `close` as soon as its body has been read to the end (a body parser mounted before the
 * control), while the client still waits for the answer. It counts as a departure only
 * when the body was cut short (`complete` false) or the connection is gone; otherwise the
 * connection's own `close` reports a later departure.
 */

/** The part of Node's connection (`net.Socket`) the lifetimes follow. */
interface Socket {
  once(event: 'close', listener: () => void): unknown;
  readonly destroyed: boolean;
}

/**
 * The part of Node's `IncomingMessage` the lifetimes follow. Structural, so the older
 * controls helpers that `@tollgate/core/http` exports use these without loading `node:http`.
 */
export interface NodeRequest {
  readonly socket: Socket | null;
  readonly complete: boolean;
  on(event: 'close', listener: () => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}

/** The part of Node's `ServerResponse` the lifetimes follow. */
export interface NodeResponse {
  once(event: 'finish' | 'close', listener: () => void): unknown;
  removeListener(event: 'finish' | 'close', listener: () => void): unknown;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
  readonly closed: boolean;
}

/**
 * The callbacks waiting for each connection's `close`: one listener per connection
 * however many requests it carries (pipelined, or one after another on a keep-alive
 * connection), so a client pipelining a hundred requests adds no hundred listeners.
 */
const onSocketClose = new WeakMap<Socket, Set<() => void>>();

function watchSocket(req: NodeRequest, fn: () => void): () => void {
  const socket = req.socket as Socket | null | undefined;
  if (socket === null || socket === undefined || typeof socket.once !== 'function') return () => {};
  let waiting = onSocketClose.get(socket);
  if (waiting === undefined) {
    const set = new Set<() => void>();
    waiting = set;
    onSocketClose.set(socket, set);
    socket.once('close', () => {
      onSocketClose.delete(socket);
      for (const f of [...set]) f();
    });
  }
  waiting.add(fn);
  const set = waiting;
  return () => {
    set.delete(fn);
  };
}

/** Whether the request's `close` means the client went away (see the file's comment). */
function departed(req: NodeRequest): boolean {
  if (req.complete === false) return true;
  const socket = req.socket as Socket | null | undefined;
  return socket === null || socket === undefined || socket.destroyed === true;
}

/** True when the response can no longer be delivered: the connection is gone. */
export function isGone(req: NodeRequest, res: NodeResponse): boolean {
  if (res.writableEnded) return false;
  if (res.destroyed) return true;
  const socket = req.socket as Socket | null | undefined;
  return socket !== null && socket !== undefined && socket.destroyed === true;
}

/**
 * Calls `fn` once, when the response finishes or closes or the request closes, whichever
 * comes first. Returns a function that does the same at once (idempotent).
 */
export function onceOver(req: NodeRequest, res: NodeResponse, fn: () => void): () => void {
  return watchOver(req, res, fn).run;
}

/**
 * Calls `fn` once when the request is over, as {@link onceOver} does, unless the returned
 * function is called first (it stops watching; `fn` then never runs). How an awaited
 * stage settles when its client leaves while held: a queued pipelined response emits
 * neither `finish` nor `close`, the connection's `close` still comes.
 */
export function untilOver(req: NodeRequest, res: NodeResponse, fn: () => void): () => void {
  return watchOver(req, res, fn).off;
}

function watchOver(req: NodeRequest, res: NodeResponse, fn: () => void): { run: () => void; off: () => void } {
  let done = false;
  let unwatch = () => {};
  const onRequestClose = () => {
    if (departed(req)) run();
  };
  const off = () => {
    if (done) return;
    done = true;
    res.removeListener('finish', run);
    res.removeListener('close', run);
    req.removeListener('close', onRequestClose);
    unwatch();
  };
  const run = () => {
    if (done) return;
    off();
    fn();
  };
  // A request already over emits nothing more: run now rather than leak.
  if (res.closed || isGone(req, res)) {
    run();
    return { run, off };
  }
  res.once('finish', run);
  res.once('close', run);
  req.on('close', onRequestClose);
  unwatch = watchSocket(req, run);
  return { run, off };
}

/**
 * Calls `fn` if the client goes away (the response or the request closes) before the
 * returned cancel function is called.
 */
export function whenGone(req: NodeRequest, res: NodeResponse, fn: () => void): () => void {
  let over = false;
  const gone = () => {
    if (over) return;
    off();
    fn();
  };
  const onRequestClose = () => {
    if (departed(req)) gone();
  };
  const off = () => {
    if (over) return;
    over = true;
    res.removeListener('close', gone);
    req.removeListener('close', onRequestClose);
    unwatch();
  };
  res.once('close', gone);
  req.on('close', onRequestClose);
  const unwatch = watchSocket(req, gone);
  return off;
}
