/**
 * The guard on both Nest platforms through real servers: the app's rules and a handler's
 * `@RateLimit` rules decided as one stack, named in the IETF headers; `@SkipRateLimit`;
 * the decision on the request; the refusal sent by the guard, byte for byte as on every
 * port.
 */
import { Controller, Get, Module, Req, UseGuards } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ManualClock, PROBLEM_QUOTA_EXCEEDED } from '@tollgate/core';
import { RateLimit, SkipRateLimit, TollgateGuard, TollgateModule } from '@tollgate/nestjs';
import { afterEach, describe, expect, it } from 'vitest';
import { listen, platforms, type Running } from './apps.js';

const running: Running[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

@Controller()
class ItemsController {
  @Get('items')
  @RateLimit({ rules: [{ name: 'items', limit: 5, window: '1m' }] })
  items(@Req() req: { rateLimit?: unknown }) {
    return { rateLimit: req.rateLimit ?? null };
  }

  @Get('health')
  @SkipRateLimit()
  health(@Req() req: { rateLimit?: unknown }) {
    return { rateLimit: req.rateLimit ?? null };
  }

  @Get('plain')
  plain() {
    return { ok: true };
  }
}

function appModule(clock: ManualClock) {
  @Module({
    imports: [TollgateModule.forRoot({ rules: [{ name: 'ip', limit: 3, window: '1m' }], clock })],
    controllers: [ItemsController],
    providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
  })
  class AppModule {}
  return AppModule;
}

describe.each(platforms)('TollgateGuard on Nest %s', (platform) => {
  it('answers the 4th request of a client with 429, Retry-After, RateLimit and RateLimit-Policy naming both rules of the stack', async () => {
    const app = await listen(platform, appModule(new ManualClock(1_000_000)));
    running.push(app);
    const first = await app.get('/items');
    expect(first.status).toBe(200);
    expect(first.body.rateLimit.rules.map((r: { name: string }) => r.name)).toEqual(['ip', 'items']);
    await app.get('/items');
    await app.get('/items');
    const refused = await app.get('/items');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['ratelimit-policy']).toBe('"ip";q=3;w=60, "items";q=5;w=60');
    expect(refused.headers.ratelimit).toMatch(/^"ip";r=0;t=\d+, "items";r=2;t=\d+$/);
    expect(refused.headers['content-type']).toBe('application/problem+json');
    expect(refused.headers['cache-control']).toBe('no-store');
    expect(refused.body).toMatchObject({ type: PROBLEM_QUOTA_EXCEEDED, status: 429, 'violated-policies': ['ip'] });
  });

  it('@SkipRateLimit exempts a handler; an undecorated handler has the app stack alone', async () => {
    const app = await listen(platform, appModule(new ManualClock(1_000_000)));
    running.push(app);
    for (let i = 0; i < 4; i++) expect((await app.get('/health')).body).toEqual({ rateLimit: null });
    const plain = await app.get('/plain');
    expect(plain.headers['ratelimit-policy']).toBe('"ip";q=3;w=60');
    expect([(await app.get('/plain')).status, (await app.get('/plain')).status, (await app.get('/plain')).status]).toEqual([200, 200, 429]);
  });

  it('per controller with @UseGuards, a controller-level @RateLimit adds to the app rules and to its handlers', async () => {
    @Controller('c')
    @UseGuards(TollgateGuard)
    @RateLimit({ rules: [{ name: 'controller', limit: 10, window: '1m' }] })
    class Limited {
      @Get('a')
      @RateLimit({ rules: [{ name: 'a', limit: 2, window: '1m' }] })
      a() {
        return 'a';
      }
    }
    @Controller('free')
    class Free {
      @Get()
      free() {
        return 'free';
      }
    }
    @Module({
      imports: [TollgateModule.forRoot({ rules: [{ name: 'ip', limit: 100, window: '1m' }], clock: new ManualClock(0) })],
      controllers: [Limited, Free],
    })
    class AppModule {}
    const app = await listen(platform, AppModule);
    running.push(app);
    const a = await app.get('/c/a');
    expect(a.headers['ratelimit-policy']).toBe('"ip";q=100;w=60, "controller";q=10;w=60, "a";q=2;w=60');
    expect((await app.get('/c/a')).status).toBe(200);
    expect((await app.get('/c/a')).status).toBe(429);
    const free = await app.get('/free');
    expect(free.status).toBe(200);
    expect(free.headers['ratelimit-policy']).toBeUndefined();
  });

  it('a leaky-bucket queue holds the request, then lets it on: the handler runs after the delay', async () => {
    @Controller()
    class Queued {
      @Get('q')
      q(@Req() req: { rateLimit?: { delayMs: number } }) {
        return { delayMs: req.rateLimit?.delayMs };
      }
    }
    // The decision's clock stands still; the hold waits on real timers (50 ms a unit).
    const rules = [{ name: 'q', algorithm: 'leaky-bucket' as const, mode: 'queue' as const, rate: '20/s' as const, queue: 3 }];
    @Module({
      imports: [TollgateModule.forRoot({ rules, clock: new ManualClock(0) })],
      controllers: [Queued],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })
    class AppModule {}
    const app = await listen(platform, AppModule);
    running.push(app);
    const replies = await Promise.all([app.get('/q'), app.get('/q'), app.get('/q')]);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(replies.map((r) => r.body.delayMs).sort((a, b) => a - b)).toEqual([50, 100, 150]);
  });

  it('a @RateLimit rule named like a module rule fails the app at startup with TG_DUPLICATE_RULE', async () => {
    @Controller()
    class Clash {
      @Get('clash')
      @RateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }] })
      clash() {
        return 'clash';
      }
    }
    @Module({ imports: [TollgateModule.forRoot({ rules: [{ name: 'ip', limit: 3, window: '1m' }] })], controllers: [Clash] })
    class AppModule {}
    await expect(listen(platform, AppModule)).rejects.toMatchObject({ code: 'TG_DUPLICATE_RULE' });
  });
});

it('@RateLimit checks its options when applied', () => {
  expect(() => RateLimit({ rule: [] } as never)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
  expect(() => RateLimit({ rules: [], mode: 'swap' } as never)).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
});
