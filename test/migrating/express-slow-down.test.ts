/**
 * docs/migrating.md, express-slow-down: the recipe's throttle and tollgate's `slowDown`
 * side by side on real Express servers with the same arrivals on a faked `Date`; the
 * delays each request was given are compared (both report them on `req.slowDown`), and
 * the waits are real but a few milliseconds long.
 */
import { slowDown } from '@tollgate/express';
import express, { type RequestHandler } from 'express';
import { slowDown as peerSlowDown } from 'express-slow-down';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { at } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
});

/** An app answering the delay the throttle gave the request, as the peer or tollgate reports it. */
function app(throttle: RequestHandler): express.Express {
  const a = express();
  a.use(throttle);
  a.get('/', (req, res) => {
    const s = (req as unknown as { slowDown: { delay?: number; delayMs?: number } }).slowDown;
    res.json({ delay: s.delay ?? s.delayMs });
  });
  return a;
}

async function delays(a: express.Express, times: number[]): Promise<number[]> {
  const out: number[] = [];
  for (const t of times) {
    at(t);
    out.push((await request(a).get('/')).body.delay);
  }
  return out;
}

// The recipe with a short scale: 2 free arrivals a minute, then 10 ms per hit, at most 35 ms.
const peer = () => app(peerSlowDown({ windowMs: 60_000, delayAfter: 2, delayMs: (hits) => hits * 10, maxDelayMs: 35 }));
const ours = () => app(slowDown({ window: '1m', delayAfter: 2, delay: (hits) => hits * 10, maxDelay: 35 }));

describe('express-slow-down → slowDown from @tollgate/express', () => {
  it('within one window: the same delay for every arrival (delayMs(used) = delay(hits), maxDelayMs = maxDelay)', async () => {
    const times = [0, 10, 20, 30, 40_000, 59_999];
    const a = await delays(peer(), times);
    const b = await delays(ours(), times);
    expect(a).toEqual([0, 0, 30, 35, 35, 35]);
    expect(b).toEqual(a);
  });

  it("after the window: express-slow-down forgets every arrival at once when its window (opened by the client's first request) ends, tollgate each arrival a window after it came", async () => {
    const times = [0, 30_000, 30_001, 60_000, 60_001, 90_002];
    const a = await delays(peer(), times);
    const b = await delays(ours(), times);
    // Peer: a new window opens at 60 s, so the arrivals of 30 s no longer count.
    expect(a).toEqual([0, 0, 30, 0, 0, 30]);
    // tollgate: at 60 s the arrivals of 30 s are still within the last minute (hits 3, then 4).
    expect(b).toEqual([0, 0, 30, 30, 35, 30]);
    expect(b).not.toEqual(a);
  });

  it('the default delay is the same: (hits - delayAfter) × 1000 ms', async () => {
    // Only the figure is compared; waiting a second is not needed to know it.
    const a = peerSlowDown({ windowMs: 60_000, delayAfter: 1, maxDelayMs: 0 });
    const b = slowDown({ window: '1m', delayAfter: 1, maxDelay: 1 });
    const seen: number[][] = [[], []];
    for (const [i, mw] of [a, b].entries()) {
      const x = express();
      x.use(mw);
      x.get('/', (req, res) => {
        const s = (req as unknown as { slowDown: { used?: number; hits?: number } }).slowDown;
        (seen[i] as number[]).push(s.used ?? (s.hits as number));
        res.end();
      });
      at(0);
      for (let n = 0; n < 3; n++) await request(x).get('/');
    }
    // The hits count this request in both (used = hits), so the default delays agree.
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[0]).toEqual([1, 2, 3]);
  });
});
