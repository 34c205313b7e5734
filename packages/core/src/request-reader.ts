/**
 * How key functions read a request: the connection peer's address and the headers,
 * through the framework port's reader set on the request by the pipeline, or Node's
 * shape (`req.socket.remoteAddress`, `req.headers`) for requests that carry none.
 */

/** A Node-shaped request: what key extraction reads when no port reader is set (Node's IncomingMessage fits). */
export interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
  socket?: { remoteAddress?: string | undefined } | null;
}

/**
 * How the key functions read a request: the connection peer's address and the headers. A
 * framework port is one (`HttpPort` extends it); the pipeline sets it on requests that are
 * not Node-shaped (a Hono context), under {@link REQUEST_READER}.
 */
export interface RequestReader<Req = never> {
  /** The address of the connection's peer as the runtime reports it, or undefined when unknown. */
  peerAddress(req: Req): string | undefined;
  /** A request header by lower-case name (repeated fields joined with `, `), or undefined. */
  header(req: Req, name: string): string | undefined;
  /** An object living as long as the request's connection, for work done once per connection. */
  connection?(req: Req): object | undefined;
}

/** Where a request carries its reader (shared by every copy of core). */
export const REQUEST_READER: unique symbol = Symbol.for('tollgate.requestReader') as never;

/** The reader of Node-shaped requests: Node's, Express' and Fastify's (`socket`, `headers`). */
export const nodeReader: RequestReader<RequestLike> = {
  peerAddress: (req) => req.socket?.remoteAddress,
  header: headerValue,
  connection: (req) => req.socket ?? undefined,
};

/** The request's reader: the one its port set on it, else Node's shape. */
export function readerOf(req: object): RequestReader<object> {
  return ((req as { [REQUEST_READER]?: RequestReader<object> })[REQUEST_READER] ?? nodeReader) as RequestReader<object>;
}

function headerValue(req: RequestLike, name: string): string | undefined {
  // A request of another shape given to a core limiter directly has no `headers`.
  const v = req.headers?.[name];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.join(', ');
}
