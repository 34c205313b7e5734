/**
 * docs/migrating.md, express-rate-limit: each recipe runs express-rate-limit and its
 * tollgate equivalent side by side on real Express servers (supertest) with the same
 * request sequence on a faked `Date`, and compares the status codes and the headers the
 * recipe promises. Where the guide says the two differ, the test shows the difference.
 */
import { constant, header } from '@tollgate/core';
import { rateLimit } from '@tollgate/express';
import express, { type RequestHandler } from 'express';
import { type Store as ErlStore, rateLimit as ercRateLimit } from 'express-rate-limit';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { at, brokenStore, items, pick } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** An app with `limiter` in front of a route answering `?status=` (default 200). */
function app(limiter: RequestHandler, setup?: (a: express.Express) => void): express.Express {
  const a = express();
  setup?.(a);
  a.use(limiter);
  a.get('/', (req, res) => {
    res.status(Number(req.query.status ?? 200)).send('ok');
  });
  return a;
}

interface Step {
  /** ms after T0 */
  t: number;
  status?: number;
  headers?: Record<string, string>;
}

/** Runs `steps` against both apps; returns what each answered, one line per step. */
async function drive(apps: express.Express[], steps: Step[], read: (res: request.Response) => unknown): Promise<[unknown[], unknown[]]> {
  const out = apps.map(() => []) as unknown[][] as [unknown[], unknown[]];
  for (const step of steps) {
    at(step.t);
    for (const [i, a] of apps.entries()) {
      const res = await request(a)
        .get(`/?status=${step.status ?? 200}`)
        .set(step.headers ?? {});
      (out[i] as unknown[]).push(read(res));
    }
  }
  return out;
}

const status = (res: request.Response) => res.status;

/** T0 is 5 s into a minute: a window opened by the first request ends at 60 s, the clock's window at 55 s. */
const windowSequence: Step[] = [0, 1000, 2000, 3000, 30_000, 54_999, 55_000, 59_999, 60_000, 60_001, 61_000, 62_000, 125_000].map((t) => ({
  t,
}));

describe('express-rate-limit → @tollgate/express', () => {
  it("the typical limiter: fixed-window with align 'first-request' gives the same statuses, Retry-After and draft-8 fields", async () => {
    const peer = app(ercRateLimit({ windowMs: 60_000, limit: 3, standardHeaders: 'draft-8', legacyHeaders: false, identifier: 'ip' }));
    const ours = app(
      rateLimit({ rules: [{ name: 'ip', limit: 3, window: '1m', algorithm: 'fixed-window', align: 'first-request' }], headers: 'draft-8' }),
    );
    const [a, b] = await drive([peer, ours], windowSequence, (res) => ({
      status: res.status,
      retryAfter: res.headers['retry-after'],
      policy: pick(items(res.headers['ratelimit-policy']), ['q', 'w']),
      state: pick(items(res.headers.ratelimit), ['r', 't']),
    }));
    expect(b).toEqual(a);
    expect(a.map((x) => (x as { status: number }).status)).toEqual([200, 200, 200, 429, 429, 429, 429, 429, 200, 200, 200, 429, 200]);
  });

  it("algorithm: 'fixed-window' alone is not the old behaviour: its windows follow the clock, express-rate-limit's a client's first request", async () => {
    const peer = app(ercRateLimit({ windowMs: 60_000, limit: 3 }));
    const ours = app(rateLimit({ rules: [{ name: 'ip', limit: 3, window: '1m', algorithm: 'fixed-window' }] }));
    const [a, b] = await drive([peer, ours], windowSequence, status);
    // The clock window of T0 (5 s past the minute) ends 55 s later; the peer's 60 s after the first request.
    expect(a).toEqual([200, 200, 200, 429, 429, 429, 429, 429, 200, 200, 200, 429, 200]);
    expect(b).toEqual([200, 200, 200, 429, 429, 429, 200, 200, 200, 429, 429, 429, 200]);
    expect(b).not.toEqual(a);
  });

  it('refusals: express-rate-limit counts them in its hits, tollgate does not; no status or header differs in a fixed window', async () => {
    const used: number[] = [];
    const peer = app(
      ercRateLimit({
        windowMs: 60_000,
        limit: 2,
        handler: (req, res) => {
          used.push((req as unknown as { rateLimit: { used: number } }).rateLimit.used);
          res.status(429).send('no');
        },
      }),
    );
    const ours = app(rateLimit({ rules: [{ name: 'ip', limit: 2, window: '1m', algorithm: 'fixed-window', align: 'first-request' }] }));
    const [a, b] = await drive(
      [peer, ours],
      [0, 1, 2, 3, 60_000].map((t) => ({ t })),
      (res) => [res.status, res.headers['retry-after']],
    );
    expect(b).toEqual(a);
    // The peer's hit count went past the limit with each refusal; tollgate's stayed at the limit.
    expect(used).toEqual([3, 4]);
  });

  it('standardHeaders draft-6 / draft-7 / true and legacyHeaders give the same header values', async () => {
    const cases: [Parameters<typeof ercRateLimit>[0], NonNullable<Parameters<typeof rateLimit>[0]['headers']>, string[]][] = [
      [
        { standardHeaders: 'draft-6', legacyHeaders: false },
        'draft-6',
        ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'],
      ],
      [
        { standardHeaders: true, legacyHeaders: false },
        'draft-6',
        ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'],
      ],
      [{ standardHeaders: 'draft-7', legacyHeaders: false }, 'draft-7', ['ratelimit-policy', 'ratelimit']],
      [{ standardHeaders: false, legacyHeaders: true }, 'legacy', ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']],
      [{ standardHeaders: 'draft-7', legacyHeaders: true }, ['draft-7', 'legacy'], ['ratelimit', 'x-ratelimit-reset']],
    ];
    for (const [peerOptions, headers, names] of cases) {
      const peer = app(ercRateLimit({ windowMs: 60_000, limit: 2, ...peerOptions }));
      const ours = app(
        rateLimit({ rules: [{ name: 'ip', limit: 2, window: '1m', algorithm: 'fixed-window', align: 'first-request' }], headers }),
      );
      const [a, b] = await drive(
        [peer, ours],
        [0, 1500, 2000, 59_999, 60_000].map((t) => ({ t: t + 200_000 })),
        (res) => [res.status, ...names.map((n) => res.headers[n])],
      );
      expect(b, JSON.stringify(peerOptions)).toEqual(a);
    }
  });

  it('skipFailedRequests / skipSuccessfulRequests → skipFailed / skipSuccessful refund the same requests', async () => {
    const seq: Step[] = [200, 500, 500, 200, 200, 500, 200].map((s, i) => ({ t: i * 10, status: s }));
    for (const [peerOpt, ruleOpt] of [
      [{ skipFailedRequests: true }, { skipFailed: true }],
      [{ skipSuccessfulRequests: true }, { skipSuccessful: true }],
    ] as const) {
      const peer = app(ercRateLimit({ windowMs: 60_000, limit: 2, ...peerOpt }));
      const ours = app(
        rateLimit({ rules: [{ name: 'ip', limit: 2, window: '1m', algorithm: 'fixed-window', align: 'first-request', ...ruleOpt }] }),
      );
      const [a, b] = await drive([peer, ours], seq, status);
      expect(b, JSON.stringify(peerOpt)).toEqual(a);
    }
  });

  it('keyGenerator → key, skip → skip, statusCode → statusCode: the same clients are counted, skipped and refused', async () => {
    const peer = app(
      ercRateLimit({
        windowMs: 60_000,
        limit: 1,
        statusCode: 503,
        keyGenerator: (req) => String(req.headers['x-user']),
        skip: (req) => req.headers['x-admin'] === 'yes',
      }),
    );
    const ours = app(
      rateLimit({
        rules: [{ name: 'user', key: header('x-user'), limit: 1, window: '1m', algorithm: 'fixed-window', align: 'first-request' }],
        statusCode: 503,
        skip: (req) => req.headers['x-admin'] === 'yes',
      }),
    );
    const seq: Step[] = [
      { t: 0, headers: { 'x-user': 'a' } },
      { t: 1, headers: { 'x-user': 'b' } },
      { t: 2, headers: { 'x-user': 'a' } },
      { t: 3, headers: { 'x-user': 'a', 'x-admin': 'yes' } },
      { t: 4, headers: { 'x-user': 'b' } },
    ];
    const [a, b] = await drive([peer, ours], seq, status);
    expect(a).toEqual([200, 200, 503, 200, 503]);
    expect(b).toEqual(a);
  });

  it('message as a string: the same body, sent as text/plain by tollgate where express-rate-limit lets Express pick text/html', async () => {
    const peer = app(ercRateLimit({ windowMs: 60_000, limit: 1, message: 'Too many requests, slow down.' }));
    const ours = app(rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], message: 'Too many requests, slow down.' }));
    const [a, b] = await drive([peer, ours], [{ t: 0 }, { t: 1 }], (res) => [
      res.status,
      res.text,
      String(res.headers['content-type']).split(';')[0],
    ]);
    expect(a[1]).toEqual([429, 'Too many requests, slow down.', 'text/html']);
    expect(b[1]).toEqual([429, 'Too many requests, slow down.', 'text/plain']);
  });

  it("passOnStoreError true / false → onStoreError 'allow' / 'error': a failing store passes the request or gives Express the error", async () => {
    vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const failing: ErlStore = {
      increment: () => Promise.reject(new Error('store down')),
      decrement: () => Promise.resolve(),
      resetKey: () => Promise.resolve(),
    };
    for (const [pass, policy, expected] of [
      [true, 'allow', 200],
      [false, 'error', 500],
    ] as const) {
      const peer = app(ercRateLimit({ windowMs: 60_000, limit: 1, store: failing, passOnStoreError: pass, validate: false }));
      const ours = app(rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], store: brokenStore(), onStoreError: policy }));
      const [a, b] = await drive([peer, ours], [{ t: 0 }], status);
      expect(a, String(pass)).toEqual([expected]);
      expect(b, String(pass)).toEqual([expected]);
    }
  });

  it('limiter.resetKey(key) → limiter.reset(req): a reset client passes again', async () => {
    const erl = ercRateLimit({ windowMs: 60_000, limit: 1, keyGenerator: () => 'k' });
    const ours = rateLimit({ rules: [{ name: 'ip', key: constant('k'), limit: 1, window: '1m' }] });
    const peer = app(erl, (a) => a.post('/reset', (_req, res) => void Promise.resolve(erl.resetKey('k')).then(() => res.send('reset'))));
    const mine = app(ours, (a) => a.post('/reset', (req, res) => void ours.reset(req).then(() => res.send('reset'))));
    for (const a of [peer, mine]) {
      at(0);
      expect((await request(a).get('/')).status).toBe(200);
      expect((await request(a).get('/')).status).toBe(429);
      await request(a).post('/reset').expect(200);
      expect((await request(a).get('/')).status).toBe(200);
    }
  });

  it("trust proxy + the default key → trustProxy: both fold IPv6 clients by /56 and read X-Forwarded-For's last hop", async () => {
    const peer = app(ercRateLimit({ windowMs: 60_000, limit: 1 }), (a) => a.set('trust proxy', 1));
    const ours = app(rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], trustProxy: 1 }));
    const seq: Step[] = [
      { t: 0, headers: { 'x-forwarded-for': '2001:db8:0:1::1' } },
      // Another /64 of the same /56: one client for both.
      { t: 1, headers: { 'x-forwarded-for': '2001:db8:0:2::1' } },
      // Another /56: another client.
      { t: 2, headers: { 'x-forwarded-for': '2001:db8:0:100::1' } },
      { t: 3, headers: { 'x-forwarded-for': '203.0.113.9' } },
    ];
    const [a, b] = await drive([peer, ours], seq, status);
    expect(a).toEqual([200, 429, 200, 200]);
    expect(b).toEqual(a);
  });
});
