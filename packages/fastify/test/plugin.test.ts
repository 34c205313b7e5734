import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import { CHANNEL_NAMES, type Decision, ManualClock, ManualTimers, MemoryStore, type Store, TollgateError } from '@tollgate/core';
import tollgate, { constant, tollgate as named, type TollgateOptions, user } from '@tollgate/fastify';
import Fastify, { type FastifyContextConfig, type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';

const clock = () => new ManualClock(0);
const fixed = (name: string, limit: number, extra: object = {}) => ({
  name,
  limit,
  window: '1m' as const,
  algorithm: 'fixed-window' as const,
  ...extra,
});

const apps: FastifyInstance[] = [];
const subscriptions: Array<{ off(): void }> = [];
afterEach(async () => {
  while (apps.length) await apps.pop()?.close();
  while (subscriptions.length) subscriptions.pop()?.off();
});

function fastify(opts: { trustProxy?: boolean | string } = {}): FastifyInstance {
  const app = Fastify({ logger: false, ...opts });
  apps.push(app);
  return app;
}

/** An app with tollgate at the root and `GET /` answering the decision's rule names. */
async function appWith(options: TollgateOptions, extra?: (app: FastifyInstance) => void | Promise<void>) {
  const app = fastify();
  await app.register(tollgate, options);
  await extra?.(app);
  app.get('/', async (request) => ({ rules: request.rateLimit?.rules.map((r) => r.name) ?? null }));
  return app;
}

function listen(channel: string) {
  const seen: unknown[] = [];
  const fn = (m: unknown) => seen.push(m);
  diagnosticsChannel.subscribe(channel, fn);
  const s = { seen, off: () => diagnosticsChannel.unsubscribe(channel, fn) };
  subscriptions.push(s);
  return s;
}

/** A store that fails every call, as a Redis store without a failure policy would. */
function brokenStore(): Store {
  const fail = () => Promise.reject(new Error('store down'));
  return { consume: fail, peek: fail, refund: fail, reset: fail, close: async () => {} };
}

/** An error handler that shows it was reached (set before the routes, as Fastify binds it per route). */
function appErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err, _request, reply) => {
    reply.code(500).send({ handledByApp: (err as Error).message });
  });
}

function statusOf(app: FastifyInstance, url = '/', method: 'GET' | 'POST' | 'HEAD' = 'GET') {
  return app.inject({ method, url }).then((r) => r.statusCode);
}

async function statuses(app: FastifyInstance, n: number, url = '/', method: 'GET' | 'POST' | 'HEAD' = 'GET') {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await statusOf(app, url, method));
  return out;
}

describe('registration', () => {
  it('is a fastify-plugin with a name and a Fastify range; default and named exports are the same plugin', () => {
    expect(named).toBe(tollgate);
    const meta = (tollgate as unknown as Record<symbol, { name: string; fastify: string }>)[Symbol.for('plugin-meta')];
    expect(meta).toMatchObject({ name: '@tollgate/fastify', fastify: '5.x' });
    expect((tollgate as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')]).toBe(true);
  });

  it('validates options with stable codes; @fastify/rate-limit names point to their replacement', async () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [{ rules: [fixed('a', 1)], bogus: 1 }, 'TG_UNKNOWN_OPTION', /tollgate\.bogus.*Remove the option/],
      [{ rules: [fixed('a', 1)], max: 100 }, 'TG_UNKNOWN_OPTION', /@fastify\/rate-limit option; use a rule's limit/],
      [{ rules: [fixed('a', 1)], keyGenerator: () => 'k' }, 'TG_UNKNOWN_OPTION', /rule's key/],
      [{ rules: [fixed('a', 1)], hook: 'onSend' }, 'TG_INVALID_OPTION', /tollgate\.hook/],
      [{ rules: [fixed('a', 1)], statusCode: 200 }, 'TG_INVALID_OPTION', /statusCode/],
      [{ rules: [fixed('a', 1)], onStoreError: 'ignore' }, 'TG_INVALID_OPTION', /onStoreError/],
      [{ rules: [fixed('a', 1)], timers: {} }, 'TG_INVALID_OPTION', /timers.*ManualTimers\(clock\)/],
      // The callbacks' shapes in Fastify's names (request, reply, done; the handler has no done).
      [{ rules: [fixed('a', 1)], handler: 1 }, 'TG_INVALID_OPTION', /tollgate\.handler: expected a function \(request, reply, decision\),/],
      [{ rules: [fixed('a', 1)], skip: 1 }, 'TG_INVALID_OPTION', /expected a function \(request, reply\) => boolean,/],
      [{ rules: [fixed('a', 1)], onRejected: 1 }, 'TG_INVALID_OPTION', /expected a function \(request, reply, decision\),/],
      [{ rules: [fixed('a', 1)], onStoreError: 1 }, 'TG_INVALID_OPTION', /a function \(error, request, reply, done\),/],
      [{ rules: [fixed('a', 1)], message: 1 }, 'TG_INVALID_OPTION', /a function \(request, decision\) => string \| object,/],
      [5, 'TG_INVALID_OPTION', /Register with app\.register\(tollgate/],
      [{ rules: [fixed('a', 1)], headers: 'draft-99' }, 'TG_INVALID_HEADERS', /headers/],
      [{ rules: [fixed('a', 1)], trustProxy: 'not-an-ip' }, 'TG_INVALID_TRUST_PROXY', /trustProxy/],
      [{}, 'TG_NO_RULES', /tollgate\.rules/],
      [{ rules: [{ name: 'a', rate: '1/s', window: '1m' }] }, 'TG_INVALID_OPTION', /rate/],
    ];
    for (const [options, code, message] of cases) {
      const app = fastify();
      const err = await app.register(tollgate, options as TollgateOptions).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, JSON.stringify(options)).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe(code);
      expect((err as TollgateError).message).toMatch(message);
    }
  });

  it('a bad route config fails at route registration, naming the route', async () => {
    const bad: Array<[unknown, string, RegExp]> = [
      [{ rules: [fixed('ip', 1)] }, 'TG_DUPLICATE_RULE', /route rules/],
      [{ rules: 'lots' }, 'TG_INVALID_OPTION', /POST \/login config\.rateLimit\.rules/],
      [{ max: 3 }, 'TG_UNKNOWN_OPTION', /POST \/login config\.rateLimit\.max.*@fastify\/rate-limit/],
      [true, 'TG_INVALID_OPTION', /POST \/login config\.rateLimit/],
      [{ hook: 'onResponse' }, 'TG_INVALID_OPTION', /config\.rateLimit\.hook/],
    ];
    for (const [rateLimit, code, message] of bad) {
      const app = await appWith({ rules: [fixed('ip', 10)] });
      let err: unknown;
      try {
        app.post('/login', { config: { rateLimit: rateLimit as never } }, async () => 'in');
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(rateLimit)).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe(code);
      expect((err as TollgateError).message).toMatch(message);
    }
  });

  it('two registrations in one scope are allowed (request decorator added once)', async () => {
    const app = fastify();
    await app.register(tollgate, { rules: [fixed('a', 5)], clock: clock() });
    await app.register(tollgate, { rules: [fixed('b', 5)], clock: clock() });
    app.get('/', async (request) => request.rateLimit?.rules.map((r) => r.name));
    const res = await app.inject('/');
    expect(res.json()).toEqual(['a', 'b']);
    expect(res.headers.ratelimit).toBe('"a";r=4;t=60, "b";r=4;t=60');
  });
});

describe('hooks', () => {
  /** A POST route with a body parser and a preValidation hook that count their calls. */
  async function spiedApp(options: TollgateOptions) {
    const calls = { parser: 0, preValidation: 0, handler: 0 };
    const app = fastify();
    await app.register(tollgate, options);
    app.addContentTypeParser('application/x-spy', { parseAs: 'string' }, (_req, body, done) => {
      calls.parser++;
      done(null, body);
    });
    app.post(
      '/upload',
      {
        preValidation: (_request, _reply, done) => {
          calls.preValidation++;
          done();
        },
      },
      async () => {
        calls.handler++;
        return 'stored';
      },
    );
    const upload = () =>
      app.inject({ method: 'POST', url: '/upload', headers: { 'content-type': 'application/x-spy' }, payload: 'x'.repeat(1000) });
    return { app, calls, upload };
  }

  it('onRequest (default) refuses before the body is parsed and before any later hook runs', async () => {
    const { calls, upload } = await spiedApp({ rules: [fixed('ip', 1)], clock: clock() });
    expect((await upload()).statusCode).toBe(200);
    expect(calls).toEqual({ parser: 1, preValidation: 1, handler: 1 });
    const refused = await upload();
    expect(refused.statusCode).toBe(429);
    // Neither the body parser nor the preValidation hook ran for the refused request.
    expect(calls).toEqual({ parser: 1, preValidation: 1, handler: 1 });
  });

  it('preHandler decides after the body is parsed (the parser runs for a refused request)', async () => {
    const { calls, upload } = await spiedApp({ rules: [fixed('ip', 1)], clock: clock(), hook: 'preHandler' });
    await upload();
    expect((await upload()).statusCode).toBe(429);
    expect(calls).toEqual({ parser: 2, preValidation: 2, handler: 1 });
  });

  it('preParsing refuses before the body is parsed', async () => {
    const { calls, upload } = await spiedApp({ rules: [fixed('ip', 1)], clock: clock(), hook: 'preParsing' });
    await upload();
    expect((await upload()).statusCode).toBe(429);
    expect(calls).toEqual({ parser: 1, preValidation: 1, handler: 1 });
  });

  it("hook: 'preHandler' keys on the user an authentication hook of the route set", async () => {
    const app = fastify();
    await app.register(tollgate, {
      rules: [{ ...fixed('user', 1), key: user((req: FastifyRequest & { user?: { id: string } }) => req.user?.id) }],
      clock: clock(),
      hook: 'preHandler',
    });
    app.decorateRequest('user', undefined);
    app.get(
      '/me',
      {
        // Route-level preHandler (e.g. @fastify/auth): tollgate's preHandler runs after it.
        preHandler: (request, _reply, done) => {
          (request as FastifyRequest & { user?: { id: string } }).user = { id: String(request.headers['x-user']) };
          done();
        },
      },
      async (request) => request.rateLimit?.rules.map((r) => r.name),
    );
    const as = (u: string) => app.inject({ url: '/me', headers: { 'x-user': u } }).then((r) => r.statusCode);
    expect(await as('alice')).toBe(200);
    expect(await as('alice')).toBe(429);
    expect(await as('bob')).toBe(200);
  });

  it('a route may choose its own hook for its whole stack', async () => {
    const app = fastify();
    const seen: string[] = [];
    await app.register(tollgate, { rules: [fixed('ip', 5)], clock: clock() });
    app.addHook('preValidation', (request, _reply, done) => {
      seen.push(`preValidation sees ${request.rateLimit?.rules.length ?? 0} rules`);
      done();
    });
    app.get('/early', async () => 'ok');
    app.get('/late', { config: { rateLimit: { rules: [fixed('late', 5)], hook: 'preHandler' } } }, async (request) =>
      request.rateLimit?.rules.map((r) => r.name),
    );
    await app.inject('/early');
    const late = await app.inject('/late');
    expect(seen).toEqual(['preValidation sees 1 rules', 'preValidation sees 0 rules']);
    expect(late.json()).toEqual(['ip', 'late']);
  });

  it("the route's own onRequest hooks run after tollgate's (a refusal skips their work)", async () => {
    const app = await appWith({ rules: [fixed('ip', 1)], clock: clock() });
    let work = 0;
    app.get(
      '/busy',
      {
        onRequest: [
          (_request, _reply, done) => {
            work++;
            done();
          },
        ],
      },
      async () => 'ok',
    );
    expect(await statuses(app, 2, '/busy')).toEqual([200, 429]);
    expect(work).toBe(1);
  });
});

describe('per-route config', () => {
  it('route rules and plugin rules are one all-or-nothing decision', async () => {
    const app = await appWith({ rules: [fixed('ip', 3)], clock: clock() }, (a) => {
      a.post('/login', { config: { rateLimit: { rules: [fixed('login', 1)] } } }, async () => 'in');
    });
    expect(await statuses(app, 3, '/login', 'POST')).toEqual([200, 429, 429]);
    // Only the admitted login consumed an ip unit: the refused ones gave nothing.
    expect(await statuses(app, 3)).toEqual([200, 200, 429]);
  });

  it('rateLimit: false turns every registration off for the route', async () => {
    const app = fastify();
    await app.register(tollgate, { rules: [fixed('outer', 1)], clock: clock() });
    await app.register(async (child) => {
      await child.register(tollgate, { rules: [fixed('inner', 1)], clock: clock() });
      child.get('/healthz', { config: { rateLimit: false } }, async (request) => ({ rateLimit: request.rateLimit ?? null }));
    });
    const res = await app.inject('/healthz');
    expect(res.json()).toEqual({ rateLimit: null });
    expect(res.headers.ratelimit).toBeUndefined();
    expect(await statuses(app, 3, '/healthz')).toEqual([200, 200, 200]);
  });

  it('routes naming one group share one budget (unlike @fastify/rate-limit groupId), also without plugin-level rules', async () => {
    for (const rules of [[fixed('ip', 100)], []]) {
      const app = await appWith({ rules, clock: clock() }, (a) => {
        const shared = (name: string) => ({ config: { rateLimit: { rules: [fixed(name, 3, { group: 'export' })] } } });
        a.get('/export/csv', shared('csv'), async () => 'csv');
        a.get('/export/pdf', shared('pdf'), async () => 'pdf');
      });
      const seen = [
        await statusOf(app, '/export/csv'),
        await statusOf(app, '/export/pdf'),
        await statusOf(app, '/export/csv'),
        await statusOf(app, '/export/pdf'),
        await statusOf(app, '/export/csv'),
      ];
      expect(seen, `plugin rules: ${rules.length}`).toEqual([200, 200, 200, 429, 429]);
    }
  });

  it('rules: [] limits only the routes that declare rules', async () => {
    const app = await appWith({ rules: [], clock: clock() }, (a) => {
      a.get('/strict', { config: { rateLimit: { rules: [fixed('strict', 1)] } } }, async () => 'ok');
    });
    expect(await statuses(app, 3)).toEqual([200, 200, 200]);
    expect((await app.inject('/')).headers.ratelimit).toBeUndefined();
    expect(await statuses(app, 2, '/strict')).toEqual([200, 429]);
  });

  it('the implicit HEAD route shares the GET route counters', async () => {
    const app = await appWith({ rules: [], clock: clock() }, (a) => {
      a.get('/doc', { config: { rateLimit: { rules: [fixed('doc', 2)] } } }, async () => 'doc');
    });
    expect(await statusOf(app, '/doc', 'HEAD')).toBe(200);
    expect(await statusOf(app, '/doc')).toBe(200);
    expect(await statusOf(app, '/doc', 'HEAD')).toBe(429);
    expect(await statusOf(app, '/doc')).toBe(429);
  });

  it('a route-level onRequest array declared by the app is not modified (so the HEAD copy is not hooked twice)', async () => {
    const own = [(_q: unknown, _s: unknown, done: () => void) => done()];
    const app = await appWith({ rules: [fixed('ip', 2)], clock: clock() }, (a) => {
      a.get('/x', { onRequest: own }, async (request) => request.rateLimit?.rules.length);
    });
    expect(own).toHaveLength(1);
    // One unit per request, GET or HEAD: two requests pass, the third is refused.
    expect([await statusOf(app, '/x', 'HEAD'), await statusOf(app, '/x'), await statusOf(app, '/x')]).toEqual([200, 200, 429]);
  });

  it('config.rateLimit on a route no registration covers has no effect (documented)', async () => {
    const app = fastify();
    await app.register(async (limited) => {
      await limited.register(tollgate, { rules: [fixed('ip', 5)], clock: clock() });
    });
    await app.register(async (sibling) => {
      sibling.get('/free', { config: { rateLimit: { rules: [fixed('free', 1)] } } }, async () => 'ok');
    });
    expect(await statuses(app, 3, '/free')).toEqual([200, 200, 200]);
  });
});

describe('encapsulation', () => {
  it('registered inside a prefix-scoped plugin it limits that scope only', async () => {
    const app = fastify();
    await app.register(
      async (api) => {
        await api.register(tollgate, { rules: [fixed('api', 1)], clock: clock() });
        api.get('/items', async () => 'items');
      },
      { prefix: '/api' },
    );
    app.get('/public', async (request) => ({ rateLimit: request.rateLimit ?? null }));
    expect(await statuses(app, 2, '/api/items')).toEqual([200, 429]);
    const pub = await app.inject('/public');
    expect(pub.json()).toEqual({ rateLimit: null });
    expect(pub.headers['ratelimit-policy']).toBeUndefined();
    expect(await statuses(app, 3, '/public')).toEqual([200, 200, 200]);
  });

  it('a global and a scoped registration stack: items appended, request.rateLimit merges both, route rules counted once', async () => {
    const app = fastify();
    const store = new MemoryStore();
    await app.register(tollgate, { rules: [fixed('global', 100, { key: constant('all') })], clock: clock(), store });
    await app.register(
      async (api) => {
        await api.register(tollgate, { rules: [fixed('api', 10)], clock: clock(), store });
        api.get('/items', async (request) => request.rateLimit?.rules.map((r) => `${r.name}:${r.remaining}`));
        api.post('/orders', { config: { rateLimit: { rules: [fixed('orders', 2)] } } }, async (request) => ({
          rules: request.rateLimit?.rules.map((r) => `${r.name}:${r.remaining}`),
          allowed: request.rateLimit?.allowed,
        }));
      },
      { prefix: '/api' },
    );
    const res = await app.inject({ method: 'POST', url: '/api/orders' });
    expect(res.headers['ratelimit-policy']).toBe('"global";q=100;w=60, "api";q=10;w=60, "orders";q=2;w=60');
    expect(res.headers.ratelimit).toBe('"global";r=99;t=60, "api";r=9;t=60, "orders";r=1;t=60');
    // Route rules join the innermost registration only: 'orders' is decided (and counted) once.
    expect(res.json()).toEqual({ rules: ['global:99', 'api:9', 'orders:1'], allowed: true });
    await app.inject({ method: 'POST', url: '/api/orders' });
    const refused = await app.inject({ method: 'POST', url: '/api/orders' });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()['violated-policies']).toEqual(['orders']);
    // The refusal carries both registrations' items.
    expect(refused.headers['ratelimit-policy']).toBe('"global";q=100;w=60, "api";q=10;w=60, "orders";q=2;w=60');
    expect(refused.headers.ratelimit).toMatch(/^"global";r=97;t=60, "api";r=\d+;t=60, "orders";r=0;t=60$/);
    // The outer registration admitted (and counted) the refused request; the inner stack
    // consumed nothing: two admitted orders and this request leave 7 api units.
    expect((await app.inject('/api/items')).json()).toEqual(['global:96', 'api:7']);
  });
});

describe('trustProxy and Fastify’s own trustProxy', () => {
  const xff = { 'x-forwarded-for': '203.0.113.9' };

  it('Fastify trustProxy: true does not make tollgate trust X-Forwarded-For (its key stays the socket address)', async () => {
    const app = fastify({ trustProxy: true });
    await app.register(tollgate, { rules: [fixed('ip', 1)], clock: clock() });
    app.get('/', async (request) => ({ ip: request.ip }));
    const first = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.1' }, remoteAddress: '127.0.0.1' });
    // Fastify believes the header, tollgate does not: a new spoofed address gets no new budget.
    expect(first.json()).toEqual({ ip: '203.0.113.1' });
    const second = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.2' }, remoteAddress: '127.0.0.1' });
    expect(second.statusCode).toBe(429);
  });

  it("tollgate's trustProxy walks the chain even when Fastify trusts nothing", async () => {
    const app = fastify();
    await app.register(tollgate, { rules: [fixed('ip', 1)], clock: clock(), trustProxy: 'loopback' });
    app.get('/', async (request) => ({ ip: request.ip }));
    const first = await app.inject({ url: '/', headers: xff, remoteAddress: '127.0.0.1' });
    expect(first.json()).toEqual({ ip: '127.0.0.1' });
    expect((await app.inject({ url: '/', headers: xff, remoteAddress: '127.0.0.1' })).statusCode).toBe(429);
    expect((await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.10' }, remoteAddress: '127.0.0.1' })).statusCode).toBe(
      200,
    );
  });

  it("keying on Fastify's request.ip is an explicit choice in a rule's key", async () => {
    const app = fastify({ trustProxy: '127.0.0.1' });
    await app.register(tollgate, { rules: [{ ...fixed('ip', 1), key: (req: FastifyRequest) => req.ip }], clock: clock() });
    app.get('/', async () => 'ok');
    const from = (a: string) =>
      app.inject({ url: '/', headers: { 'x-forwarded-for': a }, remoteAddress: '127.0.0.1' }).then((r) => r.statusCode);
    expect([await from('203.0.113.1'), await from('203.0.113.1'), await from('203.0.113.2')]).toEqual([200, 429, 200]);
  });
});

describe('hijacked replies and streams', () => {
  it('count one unit per request, and skipSuccessful refunds exactly once', async () => {
    const app = fastify();
    await app.register(tollgate, {
      rules: [fixed('ip', 3), fixed('ok-free', 2, { skipSuccessful: true, key: constant('x') })],
      clock: clock(),
    });
    app.get('/hijack', async (_request, reply) => {
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/plain' });
      reply.raw.end('raw');
    });
    app.get('/stream', async (_request, reply) => {
      const { Readable } = await import('node:stream');
      return reply.type('text/plain').send(Readable.from(['a', 'b', 'c']));
    });
    app.get('/peek', async (request) => request.rateLimit?.rules.map((r) => `${r.name}:${r.remaining}`));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    const get = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
            let body = '';
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          })
          .on('error', reject);
      });
    expect(await get('/hijack')).toEqual({ status: 200, body: 'raw' });
    expect(await get('/stream')).toEqual({ status: 200, body: 'abc' });
    // Two requests so far: ip 3 → 1 left before this one; ok-free refunded both successes.
    const peek = await get('/peek');
    expect(JSON.parse(peek.body)).toEqual(['ip:0', 'ok-free:1']);
    expect((await get('/hijack')).status).toBe(429);
  });
});

describe('refusals', () => {
  it('a handler answers with status and headers already set; onSend hooks still see the refusal', async () => {
    const app = await appWith({
      rules: [fixed('ip', 1)],
      clock: clock(),
      handler: (_request, reply, d) => {
        reply.send({ status: reply.statusCode, retry: reply.getHeader('retry-after'), by: d.rejectedBy });
      },
    });
    app.addHook('onSend', async (_request, reply, payload) => {
      reply.header('x-app', 'seen');
      return payload;
    });
    await app.inject('/');
    const res = await app.inject('/');
    expect(res.json()).toEqual({ status: 429, retry: '60', by: ['ip'] });
    expect(res.headers['x-app']).toBe('seen');
  });

  it('a throwing handler is an app bug: Fastify answers 500 through its error handler', async () => {
    const app = await appWith(
      {
        rules: [fixed('ip', 1)],
        clock: clock(),
        handler: () => {
          throw new Error('handler bug');
        },
      },
      appErrorHandler,
    );
    await app.inject('/');
    const res = await app.inject('/');
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ handledByApp: 'handler bug' });
  });
});

describe('skip', () => {
  it('sync and async skip bypass every rule, including route-level ones', async () => {
    for (const skip of [
      (req: FastifyRequest) => req.headers['x-internal'] === '1',
      async (req: FastifyRequest) => req.headers['x-internal'] === '1',
    ]) {
      const app = await appWith({ rules: [fixed('ip', 1)], clock: clock(), skip }, (a) => {
        a.get('/r', { config: { rateLimit: { rules: [fixed('r', 1)] } } }, async () => 'r');
      });
      for (let i = 0; i < 3; i++) expect((await app.inject({ url: '/r', headers: { 'x-internal': '1' } })).statusCode).toBe(200);
      expect(await statuses(app, 2)).toEqual([200, 429]);
    }
  });
});

describe('allow and deny', () => {
  it('a registration with only route rules (rules: []) still applies its lists to every route, declared before or after it', async () => {
    const app = fastify();
    app.get('/early', async () => 'early');
    app.register(tollgate, { rules: [], deny: ['192.0.2.0/24'], allow: ['198.51.100.7'], clock: clock() });
    app.get('/plain', async () => 'plain');
    app.get('/limited', { config: { rateLimit: { rules: [fixed('r', 1)] } } }, async () => 'limited');
    app.get('/off', { config: { rateLimit: false } }, async () => 'off');
    await app.ready();
    const get = (url: string, remoteAddress: string) => app.inject({ url, remoteAddress }).then((r) => r.statusCode);
    for (const url of ['/early', '/plain', '/limited']) expect(await get(url, '192.0.2.9'), url).toBe(403);
    // `config.rateLimit: false` turns the whole registration off for the route, lists included.
    expect(await get('/off', '192.0.2.9')).toBe(200);
    expect(await get('/plain', '203.0.113.1')).toBe(200);
    expect([await get('/limited', '203.0.113.1'), await get('/limited', '203.0.113.1')]).toEqual([200, 429]);
    expect([await get('/limited', '198.51.100.7'), await get('/limited', '198.51.100.7')]).toEqual([200, 200]);
    await app.close();
  });
});

describe('dryRun and diagnostics', () => {
  it('publishes every decision and refusal with the Fastify request', async () => {
    const decisions = listen(CHANNEL_NAMES.decision);
    const rejected = listen(CHANNEL_NAMES.rejected);
    const app = await appWith({ rules: [fixed('ip', 1)], clock: clock(), name: 'edge' });
    await app.inject('/');
    await app.inject('/');
    expect(decisions.seen).toHaveLength(2);
    expect(rejected.seen).toHaveLength(1);
    const m = rejected.seen[0] as { limiter: string; request: FastifyRequest; decision: Decision };
    expect(m.limiter).toBe('edge');
    expect(m.request.routeOptions.url).toBe('/');
    expect(m.decision.rejectedBy).toEqual(['ip']);
  });

  it('a dry-run registration never refuses, reports would-be refusals on tollgate:dry-run, and still sends headers', async () => {
    const dry = listen(CHANNEL_NAMES.dryRun);
    const rejected = listen(CHANNEL_NAMES.rejected);
    const app = await appWith({ rules: [fixed('ip', 1)], clock: clock(), dryRun: true });
    await app.inject('/');
    const over = await app.inject('/');
    expect(over.statusCode).toBe(200);
    expect(over.headers.ratelimit).toBe('"ip";r=0;t=60');
    expect(over.headers['retry-after']).toBeUndefined();
    expect(dry.seen).toHaveLength(1);
    expect(rejected.seen).toHaveLength(0);
  });

  it('a dry-run rule beside an enforced one: only the enforced rule refuses', async () => {
    const app = await appWith({ rules: [fixed('ip', 5), fixed('new', 1, { dryRun: true })], clock: clock() });
    expect(await statuses(app, 6)).toEqual([200, 200, 200, 200, 200, 429]);
  });
});

describe('store failures', () => {
  it('by default let the request through and publish the error; never a Fastify 500', async () => {
    const errors = listen(CHANNEL_NAMES.storeError);
    const app = await appWith({ rules: [fixed('ip', 1)], store: brokenStore(), name: 'api' });
    const res = await app.inject('/');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ rules: null });
    expect(errors.seen).toHaveLength(1);
    expect(errors.seen[0]).toMatchObject({ limiter: 'api', action: 'allow', error: expect.objectContaining({ message: 'store down' }) });
  });

  it('a store that fails synchronously (a closed MemoryStore) goes through the same policy', async () => {
    const errors = listen(CHANNEL_NAMES.storeError);
    const store = new MemoryStore();
    await store.close();
    const allowing = await appWith({ rules: [fixed('ip', 1)], store });
    expect((await allowing.inject('/')).statusCode).toBe(200);
    expect(errors.seen[0]).toMatchObject({ action: 'allow', error: expect.objectContaining({ code: 'TG_STORE_CLOSED' }) });
    const denying = await appWith({ rules: [fixed('ip', 1)], store, onStoreError: 'deny' });
    expect((await denying.inject('/')).statusCode).toBe(503);
  });

  it("'deny' answers 503 temporary-reduced-capacity", async () => {
    const app = await appWith({ rules: [fixed('ip', 1)], store: brokenStore(), onStoreError: 'deny' });
    const res = await app.inject('/');
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().type).toBe('https://iana.org/assignments/http-problem-types#temporary-reduced-capacity');
  });

  it("'error' hands the error to Fastify's error handler", async () => {
    const app = await appWith({ rules: [fixed('ip', 1)], store: brokenStore(), onStoreError: 'error' }, appErrorHandler);
    const res = await app.inject('/');
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ handledByApp: 'store down' });
  });

  it('a function decides: answer, or let the request on with done()', async () => {
    const answering = await appWith({
      rules: [fixed('ip', 1)],
      store: brokenStore(),
      onStoreError: (err, _request, reply) => {
        reply.code(502).send(`custom: ${(err as Error).message}`);
      },
    });
    const res = await answering.inject('/');
    expect(res.statusCode).toBe(502);
    expect(res.body).toBe('custom: store down');
    const passing = await appWith({ rules: [fixed('ip', 1)], store: brokenStore(), onStoreError: (_e, _q, _s, done) => done() });
    expect((await passing.inject('/')).statusCode).toBe(200);
  });

  it('a throwing key function is an app bug: it reaches the error handler, not onStoreError', async () => {
    const errors = listen(CHANNEL_NAMES.storeError);
    const app = await appWith(
      {
        rules: [
          {
            name: 'user',
            rate: '1/min',
            key: () => {
              throw new Error('no session');
            },
          },
        ],
      },
      appErrorHandler,
    );
    const res = await app.inject('/');
    expect(res.json()).toEqual({ handledByApp: 'no session' });
    expect(errors.seen).toHaveLength(0);
  });
});

describe('delays (leaky-bucket queue)', () => {
  const queue = {
    name: 'q',
    key: constant('q'),
    algorithm: 'leaky-bucket' as const,
    mode: 'queue' as const,
    limit: 10,
    window: '10s' as const,
  };

  it('holds the request until its departure on the given timers', async () => {
    const c = clock();
    const timers = new ManualTimers(c);
    const delayed = listen(CHANNEL_NAMES.delayed);
    let handled = 0;
    const app = await appWith({ rules: [queue], clock: c, timers }, (a) => {
      a.get('/work', async () => {
        handled++;
        return 'done';
      });
    });
    // One departure per second: the first at t = 1 s, the second at t = 2 s.
    const first = app.inject('/work');
    const second = app.inject('/work');
    await timers.advance(999);
    expect(handled).toBe(0);
    await timers.advance(1);
    expect((await first).statusCode).toBe(200);
    expect(handled).toBe(1);
    await timers.advance(999);
    expect(handled).toBe(1);
    await timers.advance(1);
    expect((await second).statusCode).toBe(200);
    expect(handled).toBe(2);
    expect(delayed.seen).toHaveLength(2);
  });

  it('a client that leaves while held never reaches the handler', async () => {
    const c = clock();
    const timers = new ManualTimers(c);
    let handled = 0;
    const app = await appWith({ rules: [queue], clock: c, timers }, (a) => {
      a.get('/work', async () => {
        handled++;
        return 'done';
      });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    const req = http.get({ host: '127.0.0.1', port, path: '/work', agent: false });
    req.on('error', () => {});
    for (let i = 0; i < 100 && timers.pending === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(timers.pending).toBe(1);
    req.destroy();
    for (let i = 0; i < 100 && timers.pending > 0; i++) await new Promise((r) => setTimeout(r, 10));
    // The hold's timer was cleared when the connection closed.
    expect(timers.pending).toBe(0);
    await timers.advance(5000);
    expect(handled).toBe(0);
  });

  it('dryRun never delays', async () => {
    const c = clock();
    const timers = new ManualTimers(c);
    const app = await appWith({ rules: [queue], clock: c, timers, dryRun: true });
    await app.inject('/');
    expect((await app.inject('/')).statusCode).toBe(200);
    expect(timers.pending).toBe(0);
  });
});

describe('types', () => {
  it('route config and request.rateLimit are typed through module augmentation', async () => {
    const app = await appWith({ rules: [fixed('ip', 5)], clock: clock() });
    app.get('/typed', { config: { rateLimit: { rules: [{ name: 'typed', rate: '5/min' }], hook: 'preHandler' } } }, async (request) => {
      const d: Decision | undefined = request.rateLimit;
      return d?.rules.length;
    });
    const off: FastifyContextConfig = { rateLimit: false };
    // @ts-expect-error rateLimit is a RouteRateLimit or false (Fastify infers a route's own config
    // type at the call site, so the check bites where the config is written as FastifyContextConfig)
    const wrong: FastifyContextConfig = { rateLimit: 'yes' };
    app.get('/off', { config: off }, async () => 'x');
    expect(() => app.get('/wrong', { config: wrong }, async () => 'x')).toThrow(TollgateError);
    expect(await statusOf(app, '/typed')).toBe(200);
  });
});

describe('registration slips: register without await', () => {
  const statuses = async (app: FastifyInstance, n: number, url = '/x') => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await app.inject({ method: 'GET', url })).statusCode);
    return out;
  };

  it('register without await, then routes: the routes are limited anyway', async () => {
    const app = fastify();
    void app.register(tollgate, { rules: [fixed('ip', 2)], clock: clock() });
    app.get('/x', async () => 'x');
    app.get('/own', { config: { rateLimit: { rules: [fixed('own', 1)] } } }, async () => 'own');
    app.get('/free', { config: { rateLimit: false } }, async () => 'free');
    await app.ready();
    expect(await statuses(app, 3)).toEqual([200, 200, 429]);
    // The route's own rules join the plugin-level stack; `false` still turns limiting off.
    expect((await app.inject({ method: 'GET', url: '/own' })).headers['ratelimit-policy']).toBe('"ip";q=2;w=60, "own";q=1;w=60');
    expect(await statuses(app, 3, '/free')).toEqual([200, 200, 200]);
  });

  it('routes, then register without await: the routes are limited too', async () => {
    const app = fastify();
    app.get('/x', async () => 'x');
    void app.register(tollgate, { rules: [fixed('ip', 2)], clock: clock() });
    app.get('/y', async () => 'y');
    await app.ready();
    expect(await statuses(app, 2)).toEqual([200, 200]);
    // One budget for both routes, each request counted once.
    expect(await statuses(app, 1, '/y')).toEqual([429]);
  });

  // Regression: the late-route hook was added as a three-argument hook whatever `hook` said;
  // as a preParsing hook its third argument is the payload, so `done` was never called.
  it("routes, then register without await, hook: 'preParsing': the late routes are limited and answered", async () => {
    const app = fastify();
    app.post('/x', async () => 'x');
    void app.register(tollgate, { rules: [fixed('ip', 2)], clock: clock(), hook: 'preParsing' });
    await app.ready();
    const post = async () => (await app.inject({ method: 'POST', url: '/x', payload: { a: 1 } })).statusCode;
    expect([await post(), await post(), await post()]).toEqual([200, 200, 429]);
  });

  it('awaited registration decides each route once (no scope-level hook)', async () => {
    const app = fastify();
    await app.register(tollgate, { rules: [fixed('ip', 2)], clock: clock() });
    app.get('/x', async () => 'x');
    await app.ready();
    expect((await app.inject({ method: 'GET', url: '/x' })).headers.ratelimit).toBe('"ip";r=1;t=60');
  });
});
