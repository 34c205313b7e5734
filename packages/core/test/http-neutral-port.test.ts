/**
 * The framework port without Node: a port over plain objects (the address and headers a
 * Web runtime gives, a response that is a record, "finished" and "gone" as callbacks the
 * test fires) runs the whole pipeline and the controls. `ip()`, `header()` and the allow
 * and deny lists read the port's address and headers, counting by outcome refunds on the
 * port's "finished", a held request stops on the port's "gone"; and nothing that
 * `@tollgate/core/http` loads imports `node:http`.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Decision, header, ip, ManualClock, ManualTimers } from '@tollgate/core';
import {
  concurrencyFlow,
  createRateLimit,
  type HttpPort,
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  RATE_LIMIT_WORDING,
  type RequestRateLimit,
  slowDownFlow,
} from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

/** A request as a Web runtime has it: no socket, headers behind a method. */
interface WebReq {
  address: string | undefined;
  headers: Headers;
  rateLimit?: Decision;
}
/** A response under construction, with the lifetime callbacks the test fires. */
interface WebRes {
  status: number;
  headers: Map<string, string>;
  body?: string;
  finished: Array<(status: number) => void>;
  over: Set<() => void>;
  gone: boolean;
}
type Outcome = { passed: boolean; error?: unknown };

const webPort: HttpPort<WebReq, WebRes, Outcome> = {
  name: 'web',
  peerAddress: (req) => req.address,
  header: (req, name) => req.headers.get(name) ?? undefined,
  onFinish: (_req, res, fn) => {
    res.finished.push(fn);
  },
  onceOver: (_req, res, fn) => {
    let done = false;
    const run = () => {
      if (done) return;
      done = true;
      res.over.delete(run);
      fn();
    };
    res.over.add(run);
    return run;
  },
  whenGone: (_req, res, fn) => {
    res.over.add(fn);
    return () => res.over.delete(fn);
  },
  isGone: (_req, res) => res.gone,
  getHeader: (res, name) => res.headers.get(name.toLowerCase()),
  setHeader: (res, name, value) => {
    res.headers.set(name.toLowerCase(), value);
  },
  status: (res, code) => {
    res.status = code;
  },
  send: (res, status, contentType, body) => {
    res.status = status;
    res.headers.set('content-type', contentType);
    res.body = body;
  },
  pass: (next) => {
    next.passed = true;
  },
  fail: (next, err) => {
    next.error = err;
  },
};

const request = (address: string | undefined, headers: Record<string, string> = {}): WebReq => ({ address, headers: new Headers(headers) });
const response = (): WebRes => ({ status: 200, headers: new Map(), finished: [], over: new Set(), gone: false });
const settled = () => new Promise((r) => setImmediate(r));

/** A rate limit on the web port, on a clock that stands still: a test's decisions fall in one window wherever a minute ends. */
function limiter(options: LimiterOptionsOf<WebReq, WebRes, Outcome>) {
  const o = { clock: new ManualClock(0), ...options };
  return createRateLimit(webPort, normalizeLimiterOptions<WebReq, typeof o>(o, RATE_LIMIT_WORDING));
}

/** Runs one request through `handle`; its outcome, response and decision once settled. */
async function send(handle: (req: WebReq, res: WebRes, next: Outcome) => void, req: WebReq) {
  const res = response();
  const next: Outcome = { passed: false };
  handle(req, res, next);
  await settled();
  return { res, next, decision: req.rateLimit };
}

describe('a port without Node objects', () => {
  it("keys the default ip() and ip({ trustProxy }) on the port's address, header() on its headers", async () => {
    const core = limiter({
      rules: [
        { name: 'ip', limit: 1, window: '1m' },
        { name: 'behind', limit: 5, window: '1m', key: ip({ trustProxy: 'loopback' }) },
        { name: 'api', limit: 5, window: '1m', key: header('x-api-key') },
      ],
    });
    const first = await send(core.handle, request('203.0.113.7', { 'x-api-key': 'k1' }));
    expect(first.next.passed).toBe(true);
    const again = await send(core.handle, request('203.0.113.7'));
    expect(again.res.status).toBe(429);
    expect(again.res.headers.get('content-type')).toBe('application/problem+json');
    // Another address is another key; through a trusted loopback peer the forwarded client is the key.
    const other = await send(core.handle, request('203.0.113.8'));
    expect(other.next.passed).toBe(true);
    const forwarded = await send(core.handle, request('127.0.0.1', { 'x-forwarded-for': '198.51.100.1' }));
    expect(forwarded.next.passed).toBe(true);
    expect(await core.operations.get('behind', '198.51.100.1')).toMatchObject({ remaining: 4 });
    expect(await core.operations.get('api', 'k1')).toMatchObject({ remaining: 4 });
    await core.close();
  });

  it('matches allow and deny lists on the address the port gives', async () => {
    const core = limiter({ rules: [{ name: 'ip', limit: 5, window: '1m' }], deny: ['203.0.113.0/24'], allow: ['10.0.0.0/8'] });
    expect((await send(core.handle, request('203.0.113.9'))).res.status).toBe(403);
    const allowed = await send(core.handle, request('10.1.2.3'));
    expect(allowed.next.passed).toBe(true);
    expect(allowed.decision).toBeUndefined();
    await core.close();
  });

  it('refunds by outcome when the port says the response finished, with its status', async () => {
    const core = limiter({ rules: [{ name: 'failures', limit: 5, window: '1m', skipSuccessful: true }] });
    const ok = await send(core.handle, request('203.0.113.7'));
    expect(ok.res.finished).toHaveLength(1);
    for (const fn of ok.res.finished) fn(200);
    const failed = await send(core.handle, request('203.0.113.7'));
    for (const fn of failed.res.finished) fn(500);
    await settled();
    expect(await core.operations.get('failures', '203.0.113.7')).toMatchObject({ remaining: 4 });
    await core.close();
  });

  it("settles through the decision's class: no own settle, the decision's fields only, every admitted stage at once", async () => {
    const core = limiter({ rules: [{ name: 'tokens', limit: 100, window: '1m', cost: 10 }] });
    const route = core.route([{ name: 'route', limit: 50, window: '1m', cost: 10 }], 'add', 'route');
    const req = request('203.0.113.7');
    expect((await send(core.handle, req)).next.passed).toBe(true);
    expect((await send(route, req)).next.passed).toBe(true);
    const d = req.rateLimit as RequestRateLimit;
    // Nothing defined on the request's decision: its settle is its class's.
    expect(Object.hasOwn(d, 'settle')).toBe(false);
    expect(Object.keys(d)).toEqual(['allowed', 'delayMs', 'retryAfterMs', 'rejectedBy', 'dryRunRejectedBy', 'rules', 'at']);
    expect(d.rules.map((r) => r.name)).toEqual(['tokens', 'route']);
    await d.settle(4);
    expect(await core.operations.get('tokens', '203.0.113.7')).toMatchObject({ remaining: 96 });
    expect(await core.operations.get('route', '203.0.113.7')).toMatchObject({ remaining: 46 });
    await expect(d.settle(4)).rejects.toMatchObject({ code: 'TG_ALREADY_SETTLED' });
    await core.close();
  });

  it('holds a slowed request until its delay, and never passes one whose client the port reports gone', async () => {
    const clock = new ManualClock(1_000_000);
    const timers = new ManualTimers(clock);
    const { stage, close } = slowDownFlow(webPort, { window: '1m', delayAfter: 0, delay: 1000, clock, timers });
    const stays = await send(stage, request('203.0.113.7'));
    expect(stays.next.passed).toBe(false);
    const leaves = await send(stage, request('203.0.113.7'));
    for (const fn of [...leaves.res.over]) fn();
    await timers.advance(5000);
    await settled();
    expect(stays.next.passed).toBe(true);
    expect(leaves.next.passed).toBe(false);
    await close();
  });

  it('releases a concurrency slot once when the port says the request is over', async () => {
    const { stage, limit, close } = concurrencyFlow(webPort, { max: 1 });
    const first = await send(stage, request('203.0.113.7'));
    expect(first.next.passed).toBe(true);
    expect((await send(stage, request('203.0.113.7'))).res.status).toBe(429);
    for (const fn of [...first.res.over]) fn();
    for (const fn of [...first.res.over]) fn();
    await settled();
    expect(limit.held).toBe(0);
    expect((await send(stage, request('203.0.113.7'))).next.passed).toBe(true);
    await close();
  });
});

describe('@tollgate/core/http', () => {
  it('loads no node:http, directly or through the modules it imports', () => {
    const entry = fileURLToPath(new URL('../src/http/index.ts', import.meta.url));
    const seen = new Set<string>();
    const nodeHttp: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
        const spec = m[1] as string;
        if (/^(node:)?https?$|^(node:)?http2$/.test(spec)) nodeHttp.push(`${file}: ${spec}`);
        if (spec.startsWith('.')) visit(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      }
    };
    visit(entry);
    expect(seen.size).toBeGreaterThan(20);
    expect(seen).toContain(join(dirname(entry), 'port.ts'));
    expect(nodeHttp).toEqual([]);
  });
});
