/**
 * paceStream: a Web ReadableStream body paced by the byte bucket (for ports whose responses
 * are Web Responses), on the manual clock.
 */
import { describe, expect, it } from 'vitest';
import { paceStream } from '../src/http/index.js';
import { type ByteGrant, createByteRate, ManualClock, ManualTimers } from '../src/index.js';

function source(total: number, size: number): { stream: ReadableStream<Uint8Array>; read: () => number; cancelled: () => boolean } {
  let read = 0;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(c) {
        if (read >= total) {
          c.close();
          return;
        }
        const n = Math.min(size, total - read);
        read += n;
        c.enqueue(new Uint8Array(n));
      },
      cancel() {
        cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, read: () => read, cancelled: () => cancelled };
}

describe('paceStream', () => {
  it('gives after unpaced, then burst, then rate per second, reading the source one chunk ahead at most', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const limit = createByteRate<unknown>({ rate: 10_000, burst: 5_000, key: () => 'k', clock, timers });
    const src = source(100_000, 4096);
    const paced = paceStream(src.stream, (await limit.open({})) as ByteGrant, 2_000).getReader();
    let got = 0;
    let done = false;
    const pump = (async () => {
      for (;;) {
        const r = await paced.read();
        if (r.done) break;
        got += r.value.byteLength;
      }
      done = true;
    })();
    await timers.advance(0, 5);
    expect(got).toBe(7_000);
    expect(src.read() - got).toBeLessThanOrEqual(4096);
    await timers.advance(1000, 5);
    // Never more than after + burst + rate·T; short by less than one chunk (a take still on its way).
    expect(got).toBeLessThanOrEqual(17_000);
    expect(got).toBeGreaterThan(17_000 - limit.chunk);
    expect(src.read() - got).toBeLessThanOrEqual(4096);
    await paced.cancel();
    await pump;
    expect(done).toBe(true);
    expect(src.cancelled()).toBe(true);
    expect(limit.active).toEqual({ responses: 0, keys: 0 });
  });

  it('ends when the source ends and frees the key', async () => {
    const limit = createByteRate<unknown>({ rate: 1_000_000, key: () => 'k' });
    const src = source(50_000, 10_000);
    const body = await new Response(paceStream(src.stream, (await limit.open({})) as ByteGrant, 0)).arrayBuffer();
    expect(body.byteLength).toBe(50_000);
    expect(limit.active).toEqual({ responses: 0, keys: 0 });
  });
});
