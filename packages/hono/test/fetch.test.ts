/**
 * @tollgate/hono in fetch style: `app.request()` with Web `Request`s and no server, the
 * client address from a `connInfo` of the test's own (a runtime's bindings in
 * `c.env`), so nothing Node-shaped is anywhere near the pipeline.
 */
import { concurrency, constant, type Decision, ManualClock, MemoryStore, rateLimit } from '@tollgate/hono';
import { Hono } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import { afterEach, describe, expect, it } from 'vitest';

type Env = { Bindings: { ip: string } };
const connInfo: GetConnInfo = (c) => ({ remote: { address: (c.env as { ip: string }).ip } });
const from = (ip: string) => ({ ip });

// At a day boundary: clock-aligned windows start with the test.
const clock = new ManualClock(86_400_000 * 100);
let store: MemoryStore;
afterEach(() => store?.close());

function app(options: Parameters<typeof rateLimit>[0]) {
  store = new MemoryStore({ clock });
  const limiter = rateLimit({ store, clock, connInfo, ...options });
  const a = new Hono<Env>();
  a.use(limiter);
  a.get('/', (c) => c.json({ rateLimit: c.get('rateLimit') ?? null }));
  return { app: a, limiter };
}

describe('rateLimit in fetch style (no Node objects)', () => {
  it('answers the 4th request with 429, Retry-After, RateLimit and a policy naming both rules; the decision at c.get', async () => {
    const { app: a } = app({
      rules: [
        { name: 'burst', limit: 3, window: '1m' },
        { name: 'daily', limit: 100, window: '1d' },
      ],
    });
    for (let i = 0; i < 3; i++) {
      const ok = await a.request('/', {}, from('203.0.113.7'));
      expect(ok.status).toBe(200);
      const body = (await ok.json()) as { rateLimit: Decision };
      expect(body.rateLimit.rules.map((r) => r.name)).toEqual(['burst', 'daily']);
    }
    const refused = await a.request('/', {}, from('203.0.113.7'));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(60);
    expect(refused.headers.get('ratelimit-policy')).toBe('"burst";q=3;w=60, "daily";q=100;w=86400');
    expect(refused.headers.get('ratelimit')).toMatch(/^"burst";r=0;t=6\d/);
    expect(((await refused.json()) as { status: number }).status).toBe(429);
    // Another client has its own budget: the key is the address connInfo gives.
    expect((await a.request('/', {}, from('203.0.113.8'))).status).toBe(200);
  });

  it('never keys on a forwarding header unless a trusted proxy wrote it', async () => {
    const { app: a } = app({ rules: [{ name: 'ip', limit: 1, window: '1m' }] });
    expect((await a.request('/', { headers: { 'x-forwarded-for': '198.51.100.1' } }, from('127.0.0.1'))).status).toBe(200);
    expect((await a.request('/', { headers: { 'x-forwarded-for': '198.51.100.2' } }, from('127.0.0.1'))).status).toBe(429);
    const trusted = app({ rules: [{ name: 'ip', limit: 1, window: '1m' }], trustProxy: 'loopback' }).app;
    expect((await trusted.request('/', { headers: { 'x-forwarded-for': '198.51.100.1' } }, from('127.0.0.1'))).status).toBe(200);
    expect((await trusted.request('/', { headers: { 'x-forwarded-for': '198.51.100.2' } }, from('127.0.0.1'))).status).toBe(200);
  });

  it('adds route rules with limiter.route, one all-or-nothing decision', async () => {
    const { app: a, limiter } = app({ rules: [{ name: 'ip', limit: 10, window: '1m' }] });
    a.post('/login', limiter.route({ rules: [{ name: 'login', limit: 1, window: '1m' }] }), (c) => c.json(c.get('rateLimit')));
    const first = await a.request('/login', { method: 'POST' }, from('203.0.113.7'));
    expect(first.headers.get('ratelimit-policy')).toBe('"ip";q=10;w=60, "login";q=1;w=60');
    const second = await a.request('/login', { method: 'POST' }, from('203.0.113.7'));
    expect(second.status).toBe(429);
    // The refused route gave the app-level unit back: two requests, one counted.
    expect(await limiter.get('ip', '203.0.113.7')).toMatchObject({ remaining: 9 });
  });

  it('counts by outcome when the streamed body has been read to its end', async () => {
    store = new MemoryStore({ clock });
    const limiter = rateLimit({
      store,
      clock,
      rules: [{ name: 'errors', limit: 5, window: '1m', key: constant('k'), skipSuccessful: true }],
    });
    const a = new Hono();
    a.use(limiter);
    a.get('/stream', (c) =>
      c.body(
        new ReadableStream({
          start(ctrl) {
            ctrl.enqueue(new Uint8Array([1, 2]));
            ctrl.close();
          },
        }),
      ),
    );
    const res = await a.request('/stream');
    // Not read yet: the unit is still counted.
    expect(await limiter.get('errors', 'k')).toMatchObject({ remaining: 4 });
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(new Uint8Array([1, 2]));
    await new Promise((r) => setImmediate(r));
    expect(await limiter.get('errors', 'k')).toMatchObject({ remaining: 5 });
  });

  it('answers with the handler option and the message option', async () => {
    const { app: a } = app({
      rules: [{ name: 'ip', limit: 1, window: '1m' }],
      handler: (c, d) => c.json({ over: d.rejectedBy }),
    });
    await a.request('/', {}, from('203.0.113.7'));
    const r = await a.request('/', {}, from('203.0.113.7'));
    expect(r.status).toBe(429);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(60);
    expect(await r.json()).toEqual({ over: ['ip'] });
  });

  it('holds a concurrency slot until the body is read or cancelled', async () => {
    const limit = concurrency({ max: 1, key: constant('k') });
    const a = new Hono();
    a.use(limit);
    a.get('/', (c) => c.body(new ReadableStream({ pull: (ctrl) => ctrl.enqueue(new Uint8Array([1])) })));
    const first = await a.request('/');
    expect(limit.limit.held).toBe(1);
    expect((await a.request('/')).status).toBe(429);
    await first.body?.cancel();
    expect(limit.limit.held).toBe(0);
    const again = await a.request('/');
    expect(again.status).toBe(200);
    await again.body?.cancel();
    await limit.close();
  });
});
