/**
 * Costs known after the response through the guard, on both Nest platforms over real
 * sockets: a rule's `actualCost`, given the response as `@Res()` gives it, settles when the
 * platform's response finishes (a debt then refuses the next request with an exact
 * Retry-After), and a handler settles itself with `req.rateLimit.settle(n)`, once, instead
 * of the rule's `actualCost`.
 */

import { setImmediate as tick } from 'node:timers/promises';
import { Controller, Get, Module, Query, Req, Res } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ManualClock, MemoryStore, TollgateError } from '@tollgate/core';
import { TollgateGuard, TollgateModule, TollgateService } from '@tollgate/nestjs';
import { afterEach, describe, expect, it } from 'vitest';
import { listen, platforms, type Running } from './apps.js';

/** The response as `@Res()` gives it (Express' `res`, Fastify's reply), where the handler counts what it produced. */
type Counted = { tokens?: number };

@Controller()
class WorkController {
  // Passthrough: the handler reaches the response and Nest still sends what it returns.
  @Get('work')
  work(@Query('n') n: string, @Res({ passthrough: true }) res: Counted) {
    res.tokens = Number(n);
    return { tokens: Number(n) };
  }

  @Get('settle')
  async settle(@Query('n') n: string, @Req() req: { rateLimit?: { settle(n: number): Promise<void> } }) {
    await req.rateLimit?.settle(Number(n));
    const again = await req.rateLimit?.settle(Number(n)).then(
      () => 'settled again',
      (e: unknown) => (e instanceof TollgateError ? e.code : String(e)),
    );
    return { again };
  }
}

/** Per API key, 100 tokens a minute; a request reserves 10 and is settled at what it produced. */
function appModule(clock: ManualClock) {
  const rules = [
    {
      name: 'tokens',
      key: () => 'key1',
      algorithm: 'token-bucket' as const,
      limit: 100,
      window: '1m' as const,
      cost: 10,
      actualCost: (_req: unknown, res: unknown) => (res as Counted).tokens ?? 10,
    },
  ];
  @Module({
    imports: [TollgateModule.forRoot({ rules, store: new MemoryStore({ clock, sweepIntervalMs: 0 }), clock })],
    controllers: [WorkController],
    providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
  })
  class AppModule {}
  return AppModule;
}

const running: Running[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

/** Polls `read` (bounded: 200 turns of the event loop) until it gives `want`; returns the last value. */
async function eventually(read: () => Promise<number>, want: number): Promise<number> {
  let v = await read();
  for (let i = 0; i < 200 && v !== want; i++) {
    await tick();
    v = await read();
  }
  return v;
}

describe.each(platforms)('reserve and settle through TollgateGuard on Nest %s', (platform) => {
  it("a rule's actualCost settles when the response finishes; an over-run's debt refuses with an exact Retry-After", async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const app = await listen(platform, appModule(clock));
    running.push(app);
    const service = app.app.get(TollgateService);
    const remaining = async () => (await service.get('tokens', 'key1')).remaining;
    expect((await app.get('/work?n=40')).body).toEqual({ tokens: 40 });
    // Reserved 10 (90 left), settled at 40: 60.
    expect(await eventually(remaining, 60)).toBe(60);
    await app.get('/work?n=210');
    expect(await eventually(remaining, 0)).toBe(0);
    // 60 - 210 = -150 tokens; a request of 10 needs 160, at 0.6 s a token: 96 s.
    const refused = await app.get('/work?n=1');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('96');
    clock.advance(96_000);
    expect((await app.get('/work?n=1')).status).toBe(200);
  });

  it('a handler settles itself with req.rateLimit.settle(n), once, instead of the actualCost', async () => {
    const app = await listen(platform, appModule(new ManualClock(Date.UTC(2026, 0, 1))));
    running.push(app);
    const service = app.app.get(TollgateService);
    const first = await app.get('/settle?n=3');
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ again: 'TG_ALREADY_SETTLED' });
    // The handler's settle wins over actualCost (which would say 10 once the response finishes): 100 - 3.
    for (let i = 0; i < 20; i++) await tick();
    expect((await service.get('tokens', 'key1')).remaining).toBe(97);
  });
});
