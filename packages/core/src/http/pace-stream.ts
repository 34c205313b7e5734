/**
 * Pacing a Web `ReadableStream` body through a byte grant (`limitRate`), for ports whose
 * responses are Web `Response`s rather than Node's (Hono on any runtime): the port wraps
 * its body with `paceStream` in its `paceBody`. Pull-based, so backpressure is the
 * stream's own: a chunk is read from the source only when the consumer pulls and the
 * previous one has left, and it leaves in slices as the grant allows (views, no copies).
 * Cancelling the paced stream (the client left) cancels the source and closes the grant.
 */
import type { ByteGrant } from '../controls/byte-rate.js';

/**
 * A stream giving `body`'s bytes as `grant` allows, the first `after` unpaced.
 * @example return new Response(paceStream(res.body, grant, limit.after), res)
 */
export function paceStream(body: ReadableStream<Uint8Array>, grant: ByteGrant, after: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let unpaced = after;
  let held: Uint8Array | undefined;
  let closed = false;
  const close = (unused = 0) => {
    if (closed) return;
    closed = true;
    grant.close(unused);
  };
  const allowance = (want: number): Promise<number> => {
    if (unpaced > 0) {
      const n = Math.min(unpaced, want);
      unpaced -= n;
      return Promise.resolve(n);
    }
    return new Promise((resolve) => grant.take(want, resolve));
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          while (held === undefined || held.byteLength === 0) {
            const r = await reader.read();
            if (r.done) {
              close();
              controller.close();
              return;
            }
            held = r.value;
          }
          const n = await allowance(held.byteLength);
          if (closed) return;
          controller.enqueue(held.subarray(0, n));
          held = n === held.byteLength ? undefined : held.subarray(n);
        } catch (err) {
          close();
          controller.error(err);
        }
      },
      cancel(reason) {
        held = undefined;
        close();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
