import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import { CHANNEL_NAMES, constant, type Decision, ManualClock, MemoryStore, type Store, TollgateError } from '@tollgate/core';
import { rateLimit, user } from '@tollgate/express';
import express, { type NextFunction, type Request, type Response } from 'express';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';

const clock = () => new ManualClock(0);

function appWith(limiter: express.RequestHandler, extra?: (app: express.Express) => void) {
  const app = express();
  app.use(limiter);
  extra?.(app);
  app.get('/', (req, res) => {
    res.json({ ok: true, rateLimit: req.rateLimit ?? null });
  });
  app.use((err: Error, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).json({ handledByApp: err.message });
  });
  return app;
}

/** A store that fails every call, as a Redis store without a failure policy would. */
function brokenStore(): Store {
  const fail = () => Promise.reject(new Error('store down'));
  return { consume: fail, peek: fail, refund: fail, reset: fail, close: async () => {} };
}

function listen(channel: string) {
  const seen: unknown[] = [];
  const fn = (m: unknown) => seen.push(m);
  diagnosticsChannel.subscribe(channel, fn);
  return { seen, off: () => diagnosticsChannel.unsubscribe(channel, fn) };
}

const subscriptions: Array<{ off(): void }> = [];
afterEach(() => {
  while (subscriptions.length) subscriptions.pop()?.off();
});

describe('options are validated at construction', () => {
  it('names the problem with a stable code', () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [{ rules: [{ name: 'a', rate: '1/s' }], bogus: 1 }, 'TG_UNKNOWN_OPTION', /rateLimit\.bogus/],
      [{ rules: [{ name: 'a', rate: '1/s' }], statusCode: 200 }, 'TG_INVALID_OPTION', /statusCode/],
      [{ rules: [{ name: 'a', rate: '1/s' }], onStoreError: 'ignore' }, 'TG_INVALID_OPTION', /onStoreError/],
      [{ rules: [{ name: 'a', rate: '1/s' }], onStoreError: 'allow', passOnStoreError: true }, 'TG_INVALID_OPTION', /passOnStoreError/],
      [
        { rules: [{ name: 'a', rate: '1/s' }], handler: 'nope' },
        'TG_INVALID_OPTION',
        /handler: expected a function \(req, res, next, decision\),/,
      ],
      [{ rules: [{ name: 'a', rate: '1/s' }], message: 42 }, 'TG_INVALID_OPTION', /message/],
      [{ rules: [{ name: 'a', rate: '1/s' }], skip: 1 }, 'TG_INVALID_OPTION', /expected a function \(req, res\) => boolean,/],
      [{ rules: [{ name: 'a', rate: '1/s' }], onStoreError: 1 }, 'TG_INVALID_OPTION', /a function \(error, req, res, next\),/],
      [{ rules: [{ name: 'a', rate: '1/s' }], bogus: 1 }, 'TG_UNKNOWN_OPTION', /docs\/migrating\.md maps express-rate-limit options/],
      [{ rules: [{ name: 'a', rate: '1/s' }], timers: {} }, 'TG_INVALID_OPTION', /timers.*ManualTimers\(clock\)/],
      [{ rules: [{ name: 'a', rate: '1/s' }], headers: 'draft-99' }, 'TG_INVALID_HEADERS', /headers/],
      [{ rules: [{ name: 'a', rate: '1/s' }], trustProxy: 'not-an-ip' }, 'TG_INVALID_TRUST_PROXY', /trustProxy/],
      [{ rules: [] }, 'TG_NO_RULES', /rules/],
      [{ rules: [{ name: 'a', rate: '1/s', window: '1m' }] }, 'TG_INVALID_OPTION', /rate/],
    ];
    for (const [options, code, message] of cases) {
      let err: unknown;
      try {
        rateLimit(options as never);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(options)).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe(code);
      expect((err as TollgateError).message).toMatch(message);
    }
  });
  // Regression (issue 27): rateLimit({ windowMs, max }) only pointed to the migration page;
  // like the Fastify plugin's, the message now names tollgate's own options.
  it("an express-rate-limit option names tollgate's replacement (window, limit or rate)", () => {
    const thrown = (options: unknown) => {
      try {
        rateLimit(options as never);
      } catch (err) {
        return err as TollgateError;
      }
      throw new Error(`accepted ${JSON.stringify(options)}`);
    };
    const windowMs = thrown({ windowMs: 15 * 60 * 1000, max: 100 });
    expect(windowMs.code).toBe('TG_UNKNOWN_OPTION');
    expect(windowMs.path).toBe('rateLimit.windowMs');
    expect(windowMs.message).toMatch(
      /That is an express-rate-limit option; use a rule's window: rules: \[\{ name: 'ip', limit: 100, window: '15m' \}\], or rate: '100\/15m'/,
    );
    expect(windowMs.message).toMatch(/docs\/migrating\.md/);
    const max = thrown({ rules: [{ name: 'ip', rate: '1/s' }], max: 100 });
    expect(max.path).toBe('rateLimit.max');
    expect(max.message).toMatch(/use a rule's limit: .*limit: 100.*rate: '100\/15m'/);
    expect(thrown({ rules: [{ name: 'ip', rate: '1/s' }], standardHeaders: 'draft-8' }).message).toMatch(/use headers: 'draft-10'/);
    expect(thrown({ rules: [{ name: 'ip', rate: '1/s' }], keyGenerator: () => 'k' }).message).toMatch(/use a rule's key/);
  });
  it('route rules may not reuse an app-level rule name, and route takes only rules', () => {
    const limiter = rateLimit({ rules: [{ name: 'ip', rate: '10/min' }] });
    expect(() => limiter.route({ rules: [{ name: 'ip', rate: '1/min' }] })).toThrow(expect.objectContaining({ code: 'TG_DUPLICATE_RULE' }));
    expect(() => limiter.route({ rules: [{ name: 'login', rate: '1/min' }], headers: false } as never)).toThrow(
      expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }),
    );
  });
});

describe('store failures', () => {
  it('by default let the request through and publish the error, never reaching the error handler', async () => {
    const errors = listen(CHANNEL_NAMES.storeError);
    subscriptions.push(errors);
    const app = appWith(rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore(), name: 'api' }));
    const res = await request(app).get('/');
    expect(res.status).toBe(200);
    expect(res.body.rateLimit).toBeNull();
    expect(errors.seen).toHaveLength(1);
    expect(errors.seen[0]).toMatchObject({ limiter: 'api', action: 'allow', error: expect.objectContaining({ message: 'store down' }) });
  });
  it("'deny' answers 503 temporary-reduced-capacity", async () => {
    const app = appWith(rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore(), onStoreError: 'deny' }));
    const res = await request(app).get('/');
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.type).toBe('https://iana.org/assignments/http-problem-types#temporary-reduced-capacity');
  });
  it("'error' (or passOnStoreError: false) hands the error to Express", async () => {
    for (const o of [{ onStoreError: 'error' as const }, { passOnStoreError: false }]) {
      const app = appWith(rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore(), ...o }));
      const res = await request(app).get('/');
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ handledByApp: 'store down' });
    }
  });
  it('a function decides, with the error, request and response', async () => {
    const app = appWith(
      rateLimit({
        rules: [{ name: 'ip', rate: '1/min' }],
        store: brokenStore(),
        onStoreError: (err, _req, res) => {
          res.status(502).send(`custom: ${(err as Error).message}`);
        },
      }),
    );
    const res = await request(app).get('/');
    expect(res.status).toBe(502);
    expect(res.text).toBe('custom: store down');
  });
  it('a throwing key function is an app bug: it reaches the error handler', async () => {
    const app = appWith(
      rateLimit({
        rules: [
          {
            name: 'user',
            rate: '1/min',
            key: () => {
              throw new Error('no session');
            },
          },
        ],
      }),
    );
    const res = await request(app).get('/');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ handledByApp: 'no session' });
  });
});

describe('refusals', () => {
  const one = { rules: [{ name: 'ip', limit: 1, window: '1m' as const, algorithm: 'fixed-window' as const }], clock: clock() };
  it('a handler answers with status and headers already set', async () => {
    const app = appWith(
      rateLimit({
        ...one,
        handler: (_req, res, _next, d) => {
          res.json({ status: res.statusCode, retry: res.getHeader('retry-after'), by: d.rejectedBy });
        },
      }),
    );
    await request(app).get('/');
    const res = await request(app).get('/');
    expect(res.body).toEqual({ status: 429, retry: '60', by: ['ip'] });
  });
});

describe('skip', () => {
  it('sync and async skip bypass every rule, including route-level ones', async () => {
    for (const skip of [(req: Request) => req.headers['x-internal'] === '1', async (req: Request) => req.headers['x-internal'] === '1']) {
      const limiter = rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], clock: clock(), skip });
      const app = appWith(limiter, (a) =>
        a.get('/r', limiter.route({ rules: [{ name: 'r', limit: 1, window: '1m' }] }), (_q, s) => s.send('r')),
      );
      for (let i = 0; i < 3; i++) expect((await request(app).get('/r').set('x-internal', '1')).status).toBe(200);
      expect((await request(app).get('/')).status).toBe(200);
      expect((await request(app).get('/')).status).toBe(429);
    }
  });
});

describe('stacking', () => {
  it('two independent limiters append their draft-10 items and req.rateLimit holds both', async () => {
    const app = express();
    app.use(rateLimit({ rules: [{ name: 'ip', limit: 10, window: '1m', algorithm: 'fixed-window' }], clock: clock() }));
    app.use(
      rateLimit({ rules: [{ name: 'global', key: constant('all'), limit: 100, window: '1m', algorithm: 'fixed-window' }], clock: clock() }),
    );
    app.get('/', (req, res) => {
      res.json(req.rateLimit?.rules.map((r) => r.name));
    });
    const res = await request(app).get('/');
    expect(res.headers.ratelimit).toBe('"ip";r=9;t=60, "global";r=99;t=60');
    expect(res.headers['ratelimit-policy']).toBe('"ip";q=10;w=60, "global";q=100;w=60');
    expect(res.body).toEqual(['ip', 'global']);
  });
  it('route() without the app-level middleware decides app and route rules as one atomic stack', async () => {
    const store = new MemoryStore();
    const limiter = rateLimit({ rules: [{ name: 'ip', limit: 5, window: '1m' }], store, clock: clock() });
    const app = express();
    app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 1, window: '1m' }] }), (_req, res) => {
      res.send('in');
    });
    app.get('/', limiter, (_req, res) => {
      res.send('home');
    });
    expect((await request(app).post('/login')).status).toBe(200);
    const refused = await request(app).post('/login');
    expect(refused.status).toBe(429);
    expect(refused.headers.ratelimit).toContain('"login";r=0');
    // One login consumed one app-level unit, the refused one none: 4 are left.
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) seen.push((await request(app).get('/')).status);
    expect(seen).toEqual([200, 200, 200, 200, 429]);
  });
});

describe('counting by outcome', () => {
  it('skipSuccessful gives back requests that end below 400, after the response', async () => {
    const limiter = rateLimit({ rules: [{ name: 'login', limit: 2, window: '1m', skipSuccessful: true }], clock: clock() });
    const app = express();
    app.post('/login', limiter, (req, res) => {
      res.status(req.headers['x-password'] === 'right' ? 200 : 401).end();
    });
    // Successful logins are given back after the response: they never use up the budget.
    for (let i = 0; i < 4; i++) expect((await request(app).post('/login').set('x-password', 'right')).status).toBe(200);
    expect((await request(app).post('/login')).status).toBe(401);
    expect((await request(app).post('/login')).status).toBe(401);
    expect((await request(app).post('/login')).status).toBe(429);
  });
});

describe('diagnostics', () => {
  it('publishes every decision and every refusal with the Express request', async () => {
    const decisions = listen(CHANNEL_NAMES.decision);
    const rejected = listen(CHANNEL_NAMES.rejected);
    subscriptions.push(decisions, rejected);
    const app = appWith(rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], clock: clock(), name: 'edge' }));
    await request(app).get('/');
    await request(app).get('/');
    expect(decisions.seen).toHaveLength(2);
    expect(rejected.seen).toHaveLength(1);
    const m = rejected.seen[0] as { limiter: string; request: Request; decision: Decision };
    expect(m.limiter).toBe('edge');
    expect(m.request.method).toBe('GET');
    expect(m.decision.rejectedBy).toEqual(['ip']);
  });
  it('a dry-run limiter reports would-be refusals on tollgate:dry-run, not tollgate:rejected', async () => {
    const dry = listen(CHANNEL_NAMES.dryRun);
    const rejected = listen(CHANNEL_NAMES.rejected);
    subscriptions.push(dry, rejected);
    const app = appWith(rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], clock: clock(), dryRun: true }));
    await request(app).get('/');
    expect((await request(app).get('/')).status).toBe(200);
    expect(dry.seen).toHaveLength(1);
    expect(rejected.seen).toHaveLength(0);
  });
});

describe('delays (leaky-bucket queue)', () => {
  it('delays the request, and a client that leaves while waiting never reaches the handler', async () => {
    const delayed = listen(CHANNEL_NAMES.delayed);
    subscriptions.push(delayed);
    let handled = 0;
    const app = express();
    // One departure every 150 ms.
    app.use(rateLimit({ rules: [{ name: 'q', key: constant('q'), algorithm: 'leaky-bucket', mode: 'queue', limit: 20, window: '3s' }] }));
    app.get('/', (_req, res) => {
      handled++;
      res.send('ok');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const port = (server.address() as { port: number }).port;
    try {
      const t0 = performance.now();
      await request(server).get('/');
      expect(performance.now() - t0).toBeGreaterThanOrEqual(100);
      expect(handled).toBe(1);
      // A second client gives up after 20 ms; its turn would come about 300 ms later.
      await new Promise<void>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/' });
        req.on('error', () => resolve());
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 20);
      });
      await new Promise((r) => setTimeout(r, 400));
      expect(handled).toBe(1);
      expect(delayed.seen.length).toBeGreaterThanOrEqual(2);
    } finally {
      server.close();
    }
  });
});

describe('types and re-exports', () => {
  it('re-exports the key extractors', () => {
    expect(user((r: { id?: string }) => r.id)({ id: 'a' })).toBe('a');
  });
});

describe('reset and peek', () => {
  it('peek decides without consuming; reset forgets the request`s counters', async () => {
    const limiter = rateLimit({ rules: [{ name: 'ip', limit: 2, window: '1m', algorithm: 'fixed-window' }], clock: clock() });
    const app = express();
    app.post('/reset', async (req, res) => {
      await limiter.reset(req);
      res.send('reset');
    });
    app.get('/peek', async (req, res) => {
      const d = await limiter.peek(req);
      res.json({ allowed: d.allowed, remaining: d.rules[0]?.remaining });
    });
    app.use(limiter);
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    expect((await request(app).get('/peek')).body).toEqual({ allowed: true, remaining: 1 });
    expect((await request(app).get('/peek')).body).toEqual({ allowed: true, remaining: 1 });
    await request(app).get('/');
    await request(app).get('/');
    expect((await request(app).get('/')).status).toBe(429);
    expect((await request(app).get('/peek')).body.allowed).toBe(false);
    await request(app).post('/reset');
    expect((await request(app).get('/')).status).toBe(200);
  });
});
