/**
 * docs/nestjs.md, "Migrating from @nestjs/throttler": each recipe runs @nestjs/throttler
 * and its tollgate equivalent on Nest apps (Express platform, real sockets) with the same
 * request sequence, and compares the statuses and the headers the recipe promises. Where
 * the guide says the two differ, the test shows the difference. Every sequence stays far
 * inside its window (60 s), so neither side's clock moves a result.
 */
import { Controller, Get, Module, type Type } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { SkipThrottle, Throttle, ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { header, RateLimit, SkipRateLimit, TollgateGuard, TollgateModule, type TollgateModuleOptions } from '@tollgate/nestjs';
import { afterEach, describe, expect, it } from 'vitest';
import { listen, type Running } from '../../packages/nestjs/test/apps.js';

const running: Running[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

@Controller()
class Api {
  @Get('a')
  a() {
    return 'a';
  }
  @Get('b')
  b() {
    return 'b';
  }
  @Throttle({ default: { limit: 2, ttl: 60_000 } })
  @RateLimit({ rules: [{ name: 'login', limit: 2, window: '1m', algorithm: 'sliding-log' }], mode: 'replace' })
  @Get('login')
  login() {
    return 'login';
  }
  @SkipThrottle()
  @SkipRateLimit()
  @Get('health')
  health() {
    return 'ok';
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the module options of either library
function throttlerApp(throttlers: any[], guard: Type = ThrottlerGuard) {
  @Module({ imports: [ThrottlerModule.forRoot(throttlers)], controllers: [Api], providers: [{ provide: APP_GUARD, useClass: guard }] })
  class AppModule {}
  return listen('express', AppModule);
}

function tollgateApp(options: TollgateModuleOptions) {
  @Module({ imports: [TollgateModule.forRoot(options)], controllers: [Api], providers: [{ provide: APP_GUARD, useClass: TollgateGuard }] })
  class AppModule {}
  return listen('express', AppModule);
}

async function both(peer: Promise<Running>, ours: Promise<Running>): Promise<[Running, Running]> {
  const apps = await Promise.all([peer, ours]);
  running.push(...apps);
  return apps;
}

async function statuses(app: Running, paths: string[], headers: Record<string, string> = {}): Promise<number[]> {
  const out: number[] = [];
  for (const p of paths) out.push((await app.get(p, { headers })).status);
  return out;
}

describe('@nestjs/throttler recipes', () => {
  it('one throttler { ttl, limit } → one rule (sliding-log: every hit expires ttl after it); legacy headers give the same figures', async () => {
    const [peer, ours] = await both(
      throttlerApp([{ ttl: 60_000, limit: 3 }]),
      tollgateApp({ rules: [{ name: 'default', limit: 3, window: '1m', algorithm: 'sliding-log' }], headers: ['draft-10', 'legacy'] }),
    );
    for (const app of [peer, ours]) {
      const replies = [];
      for (let i = 0; i < 4; i++) replies.push(await app.get('/a'));
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
      expect(replies.slice(0, 3).map((r) => [r.headers['x-ratelimit-limit'], r.headers['x-ratelimit-remaining']])).toEqual([
        ['3', '2'],
        ['3', '1'],
        ['3', '0'],
      ]);
      expect(Number(replies[3]?.headers['retry-after'])).toBeGreaterThan(0);
    }
    // The difference: tollgate's refusal is an RFC 9457 problem with the IETF headers.
    const refused = await ours.get('/a');
    expect(refused.headers['content-type']).toBe('application/problem+json');
    expect(refused.headers['ratelimit-policy']).toBe('"default";q=3;w=60');
    expect((await peer.get('/a')).body).toEqual({ statusCode: 429, message: 'ThrottlerException: Too Many Requests' });
  });

  it('named throttlers → stacked rules, named in one RateLimit header instead of X-RateLimit-*-<name>', async () => {
    const [peer, ours] = await both(
      throttlerApp([
        { name: 'short', ttl: 60_000, limit: 2 },
        { name: 'long', ttl: 60_000, limit: 5 },
      ]),
      tollgateApp({
        rules: [
          { name: 'short', limit: 2, window: '1m', algorithm: 'sliding-log' },
          { name: 'long', limit: 5, window: '1m', algorithm: 'sliding-log' },
        ],
      }),
    );
    expect(await statuses(peer, ['/a', '/a', '/a'])).toEqual([200, 200, 429]);
    expect(await statuses(ours, ['/a', '/a', '/a'])).toEqual([200, 200, 429]);
    const p = await peer.get('/b');
    expect(p.headers['x-ratelimit-limit-short']).toBe('2');
    expect(p.headers['x-ratelimit-limit-long']).toBe('5');
    const o = await ours.get('/b');
    expect(o.headers['ratelimit-policy']).toBe('"short";q=2;w=60, "long";q=5;w=60');
  });

  it('the difference: throttler counts per route (class + handler in its key), a tollgate rule per client across routes', async () => {
    const [peer, ours] = await both(
      throttlerApp([{ ttl: 60_000, limit: 2 }]),
      tollgateApp({ rules: [{ name: 'default', limit: 2, window: '1m', algorithm: 'sliding-log' }] }),
    );
    expect(await statuses(peer, ['/a', '/a', '/b', '/b'])).toEqual([200, 200, 200, 200]);
    expect(await statuses(ours, ['/a', '/a', '/b', '/b'])).toEqual([200, 200, 429, 429]);
  });

  it('@Throttle({ default: { limit, ttl } }) on a handler → @RateLimit({ rules, mode: "replace" }); @SkipThrottle → @SkipRateLimit', async () => {
    const [peer, ours] = await both(
      throttlerApp([{ ttl: 60_000, limit: 10 }]),
      tollgateApp({ rules: [{ name: 'default', limit: 10, window: '1m', algorithm: 'sliding-log' }] }),
    );
    for (const app of [peer, ours]) {
      expect(await statuses(app, ['/login', '/login', '/login'])).toEqual([200, 200, 429]);
      expect(await statuses(app, Array(12).fill('/health'))).toEqual(Array(12).fill(200));
    }
  });

  it('getTracker (an overridden ThrottlerGuard) → a rule key', async () => {
    class ApiKeyGuard extends ThrottlerGuard {
      protected override async getTracker(req: Record<string, { 'x-api-key'?: string }>): Promise<string> {
        return req.headers?.['x-api-key'] ?? 'anonymous';
      }
    }
    const [peer, ours] = await both(
      throttlerApp([{ ttl: 60_000, limit: 2 }], ApiKeyGuard),
      tollgateApp({ rules: [{ name: 'default', limit: 2, window: '1m', algorithm: 'sliding-log', key: header('x-api-key') }] }),
    );
    for (const app of [peer, ours]) {
      expect(await statuses(app, ['/a', '/a', '/a'], { 'x-api-key': 'k1' })).toEqual([200, 200, 429]);
      expect(await statuses(app, ['/a'], { 'x-api-key': 'k2' })).toEqual([200]);
    }
  });
});
