import Router from '@koa/router';
import { constant, type Decision, ManualClock, type Store } from '@tollgate/core';
import { concurrency, rateLimit, shed, slowDown, user } from '@tollgate/koa';
import Koa, { type Context, type Middleware } from 'koa';
import request from 'supertest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const clock = () => new ManualClock(0);

/** An app with `middleware` first and a route answering the decision; Koa's errors collected. */
function appWith(middleware: Middleware[], routes?: (router: Router) => void) {
  const app = new Koa();
  const errors: unknown[] = [];
  app.on('error', (err) => errors.push(err));
  for (const m of middleware) app.use(m);
  const router = new Router();
  routes?.(router);
  router.get('/', (ctx) => {
    ctx.body = { ok: true, rateLimit: ctx.state.rateLimit ?? null, onContext: 'rateLimit' in ctx };
  });
  app.use(router.routes());
  return { app, errors, http: () => request(app.callback()) };
}

/** A store that fails every call, as a Redis store without a failure policy would. */
function brokenStore(): Store {
  const fail = () => Promise.reject(new Error('store down'));
  return { consume: fail, peek: fail, refund: fail, reset: fail, close: async () => {} };
}

// A failing callback must reach Koa's error handling, never the process.
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
});

describe('@tollgate/koa rateLimit', () => {
  it('the 4th request of a client is refused: 429, Retry-After, RateLimit and RateLimit-Policy naming both rules', async () => {
    const limiter = rateLimit({ rules: [{ name: 'ip', limit: 100, window: '1m', algorithm: 'fixed-window' }], clock: clock() });
    const { http } = appWith([limiter], (router) => {
      router.get('/search', limiter.route({ rules: [{ name: 'search', limit: 3, window: '1m', algorithm: 'fixed-window' }] }), (ctx) => {
        ctx.body = { rules: ctx.state.rateLimit?.rules.map((r) => r.name) };
      });
    });
    for (let i = 0; i < 3; i++) {
      const ok = await http().get('/search');
      expect(ok.status).toBe(200);
      expect(ok.body.rules).toEqual(['ip', 'search']);
    }
    const refused = await http().get('/search');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('60');
    expect(refused.headers['ratelimit-policy']).toBe('"ip";q=100;w=60, "search";q=3;w=60');
    // The refused request's app-level unit went back: 3 of 100 used.
    expect(refused.headers.ratelimit).toBe('"ip";r=97;t=60, "search";r=0;t=60');
    expect(refused.headers['content-type']).toBe('application/problem+json');
    expect(refused.body).toMatchObject({ status: 429, 'violated-policies': ['search'] });
  });

  it('the decision is at ctx.state.rateLimit, never on ctx itself; the throttle figures at ctx.state.slowDown', async () => {
    let seen: unknown;
    const { http } = appWith([
      slowDown({ window: '1m', delayAfter: 5, clock: clock() }),
      rateLimit({ rules: [{ name: 'ip', limit: 2, window: '1m' }], clock: clock() }),
      async (ctx, next) => {
        seen = ctx.state.slowDown;
        await next();
      },
    ]);
    const r = await http().get('/');
    expect(r.body.rateLimit.rules[0]).toMatchObject({ name: 'ip', remaining: 1 });
    expect(r.body.onContext).toBe(false);
    expect(seen).toMatchObject({ hits: 1, delayMs: 0 });
  });

  it('two limiters append their draft-10 items; ctx.state.rateLimit holds both decisions', async () => {
    const { http } = appWith([
      rateLimit({ rules: [{ name: 'ip', limit: 10, window: '1m', algorithm: 'fixed-window' }], clock: clock() }),
      rateLimit({ rules: [{ name: 'global', key: constant('all'), limit: 100, window: '1m', algorithm: 'fixed-window' }], clock: clock() }),
    ]);
    const r = await http().get('/');
    expect(r.headers['ratelimit-policy']).toBe('"ip";q=10;w=60, "global";q=100;w=60');
    expect(r.headers.ratelimit).toBe('"ip";r=9;t=60, "global";r=99;t=60');
    expect(r.body.rateLimit.rules.map((x: { name: string }) => x.name)).toEqual(['ip', 'global']);
  });

  it('the middleware are named for stack traces', () => {
    const limiter = rateLimit({ rules: [{ name: 'ip', rate: '1/s' }] });
    const names = [
      limiter,
      limiter.route({ rules: [{ name: 'r', rate: '1/s' }] }),
      slowDown({ window: '1s', delayAfter: 1 }),
      shed({ maxInFlight: 1 }),
    ];
    expect(names.map((m) => m.name)).toEqual(['rateLimit', 'rateLimitRoute', 'slowDown', 'shed']);
  });

  it('a handler answers as a middleware with the decision, or lets the request on with next()', async () => {
    const decisions: Decision[] = [];
    const handler = (ctx: Context, next: Koa.Next, d: Decision) => {
      decisions.push(d);
      if (ctx.get('x-vip') === 'yes') return next();
      ctx.body = { retryInMs: d.retryAfterMs };
      return undefined;
    };
    const { http } = appWith([
      rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m', algorithm: 'fixed-window' }], clock: clock(), handler }),
    ]);
    await http().get('/');
    const refused = await http().get('/');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('60');
    expect(refused.body).toEqual({ retryInMs: 60_000 });
    const vip = await http().get('/').set('x-vip', 'yes');
    expect(vip.body.ok).toBe(true);
    expect(decisions).toHaveLength(2);
  });

  it('an async handler is awaited before Koa answers', async () => {
    const handler = async (ctx: Context) => {
      await new Promise((resolve) => setImmediate(resolve));
      ctx.body = 'later';
    };
    const { http } = appWith([rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], clock: clock(), handler })]);
    await http().get('/');
    const refused = await http().get('/');
    expect([refused.status, refused.text]).toEqual([429, 'later']);
  });

  describe('store errors', () => {
    it("'allow' (default) lets the request on; 'deny' answers 503; 'error' goes to Koa's error handling", async () => {
      const allow = appWith([rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore() })]);
      expect((await allow.http().get('/')).status).toBe(200);
      const deny = appWith([rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore(), onStoreError: 'deny' })]);
      const d = await deny.http().get('/');
      expect([d.status, d.headers['content-type'], d.headers['retry-after']]).toEqual([503, 'application/problem+json', '1']);
      const error = appWith([rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore(), onStoreError: 'error' })]);
      expect((await error.http().get('/')).status).toBe(500);
      expect(error.errors).toEqual([expect.objectContaining({ message: 'store down' })]);
    });

    it('a function answers through ctx, or lets the request on with next()', async () => {
      const onStoreError = (err: unknown, ctx: Context, next: Koa.Next) => {
        if (ctx.get('x-pass') === 'yes') return next();
        ctx.status = 503;
        ctx.body = `degraded: ${(err as Error).message}`;
        return undefined;
      };
      const { http } = appWith([rateLimit({ rules: [{ name: 'ip', rate: '1/min' }], store: brokenStore(), onStoreError })]);
      const answered = await http().get('/');
      expect([answered.status, answered.text]).toEqual([503, 'degraded: store down']);
      expect((await http().get('/').set('x-pass', 'yes')).body.ok).toBe(true);
    });
  });

  describe("a failing callback goes to Koa's error handling (500, app 'error'), never to the process", () => {
    const boom = () => {
      throw new Error('boom');
    };
    const rejects = async () => {
      throw new Error('boom');
    };
    const cases: Array<[string, Parameters<typeof rateLimit>[0]]> = [
      ['a throwing key', { rules: [{ name: 'k', key: boom, limit: 1, window: '1m' }] }],
      ['a rejecting key', { rules: [{ name: 'k', key: rejects as never, limit: 1, window: '1m' }] }],
      ['a throwing cost', { rules: [{ name: 'k', cost: boom, limit: 1, window: '1m' }] }],
      ['a throwing skip', { rules: [{ name: 'ip', limit: 1, window: '1m' }], skip: boom }],
      ['a rejecting skip', { rules: [{ name: 'ip', limit: 1, window: '1m' }], skip: rejects }],
      ['a skip returning no boolean', { rules: [{ name: 'ip', limit: 1, window: '1m' }], skip: (() => 'yes') as never }],
      ['a rejecting tier', { rules: [], tiers: { free: [{ name: 'f', limit: 1, window: '1m' }] }, tier: rejects }],
      ['a throwing allow list', { rules: [{ name: 'ip', limit: 1, window: '1m' }], allow: boom }],
    ];
    // A rule that refuses every request (a cost it can never admit), for the callbacks of a refusal.
    const refuseAll: Parameters<typeof rateLimit>[0] = {
      rules: [{ name: 'none', key: constant('x'), limit: 1, window: '1m', cost: () => 2 }],
    };
    cases.push(
      ['a throwing handler', { ...refuseAll, handler: boom }],
      ['a rejecting handler', { ...refuseAll, handler: rejects }],
      ['a throwing message', { ...refuseAll, message: boom }],
      ['a throwing onRejected', { ...refuseAll, onRejected: boom }],
      ['a rejecting message', { ...refuseAll, message: rejects }],
      ['a throwing onStoreError', { rules: [{ name: 'ip', limit: 1, window: '1m' }], store: brokenStore(), onStoreError: boom }],
      ['a rejecting onStoreError', { rules: [{ name: 'ip', limit: 1, window: '1m' }], store: brokenStore(), onStoreError: rejects }],
    );
    for (const [label, options] of cases) {
      it(label, async () => {
        const { http, errors } = appWith([rateLimit({ clock: clock(), ...options })]);
        const r = await http().get('/');
        expect(r.status).toBe(500);
        expect(errors).toHaveLength(1);
        await new Promise((resolve) => setImmediate(resolve));
        expect(unhandled).toEqual([]);
      });
    }

    it('a rejecting onRejected changes nothing: the refusal is answered, nothing escapes', async () => {
      const { http, errors } = appWith([rateLimit({ clock: clock(), ...refuseAll, onRejected: rejects })]);
      expect((await http().get('/')).status).toBe(429);
      await new Promise((resolve) => setImmediate(resolve));
      expect([errors, unhandled]).toEqual([[], []]);
    });

    it("a failing control callback: slowDown's key, concurrency's key, shed's priority", async () => {
      for (const m of [
        slowDown({ window: '1m', delayAfter: 1, key: boom }),
        concurrency({ max: 1, key: rejects as never }),
        shed({ maxInFlight: 1, priority: boom }),
      ]) {
        const { http, errors } = appWith([m]);
        expect((await http().get('/')).status, m.name).toBe(500);
        expect(errors, m.name).toHaveLength(1);
        await m.close();
      }
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    });

    it('an error thrown downstream reaches Koa through the limiter', async () => {
      const { http, errors } = appWith([
        rateLimit({ rules: [{ name: 'ip', limit: 5, window: '1m' }], clock: clock() }),
        () => {
          throw new Error('handler bug');
        },
      ]);
      expect((await http().get('/')).status).toBe(500);
      expect(errors).toEqual([expect.objectContaining({ message: 'handler bug' })]);
    });
  });

  describe('options are validated at construction, in Koa words', () => {
    const rules = [{ name: 'a', rate: '1/s' }];
    const cases: Array<[unknown, string, RegExp]> = [
      [{ rules, bogus: 1 }, 'TG_UNKNOWN_OPTION', /rateLimit\.bogus/],
      [{ rules, skip: 1 }, 'TG_INVALID_OPTION', /expected a function \(ctx\) => boolean,/],
      [{ rules, onRejected: 1 }, 'TG_INVALID_OPTION', /expected a function \(ctx, decision\),/],
      [{ rules, onStoreError: 1 }, 'TG_INVALID_OPTION', /a function \(error, ctx, next\),/],
      [{ rules, handler: 'nope' }, 'TG_INVALID_OPTION', /handler: expected a function \(ctx, next, decision\),/],
      [{ rules, message: 42 }, 'TG_INVALID_OPTION', /a function \(ctx, decision\) => string \| object/],
      [null, 'TG_INVALID_OPTION', /rateLimit\(\{ rules/],
    ];
    for (const [options, code, text] of cases) {
      it(`${code} ${text}`, () => {
        expect(() => rateLimit(options as never)).toThrowError(expect.objectContaining({ code, message: expect.stringMatching(text) }));
      });
    }
    it('route takes only rules and mode, and no app-level rule name', () => {
      const limiter = rateLimit({ rules: [{ name: 'ip', rate: '10/min' }] });
      expect(() => limiter.route({ rules: [{ name: 'ip', rate: '1/min' }] })).toThrowError(
        expect.objectContaining({ code: 'TG_DUPLICATE_RULE' }),
      );
      expect(() => limiter.route({ rules: [], store: 1 } as never)).toThrowError(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
    });
  });

  it('re-exports the key extractors; the operations by key work without a request', async () => {
    const limiter = rateLimit({
      rules: [{ name: 'user', key: user((ctx: Context) => ctx.get('x-user') || undefined), limit: 1, window: '1m' }],
      clock: clock(),
    });
    const { http } = appWith([limiter]);
    expect((await http().get('/').set('x-user', 'ann')).status).toBe(200);
    expect((await http().get('/').set('x-user', 'ann')).status).toBe(429);
    await limiter.reset('user', 'ann');
    expect((await http().get('/').set('x-user', 'ann')).status).toBe(200);
  });
});
