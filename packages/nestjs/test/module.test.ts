/**
 * The module's wiring through real servers: `forRootAsync` building a RedisStore from
 * injected configuration, two app instances on one Redis sharing one budget, contexts
 * that are not HTTP refused with TG_UNSUPPORTED_CONTEXT, and bad options failing when the
 * app is created. Failing callbacks are in the shared failing-callback suite
 * (test/scenarios/failing-callbacks.test.ts), on both platforms.
 */
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { ManualClock } from '@tollgate/core';
import { SkipRateLimit, TollgateGuard, TollgateModule, type TollgateModuleOptions, TollgateService } from '@tollgate/nestjs';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { listen, type Running } from './apps.js';

@Controller()
class PingController {
  @Get('ping')
  ping() {
    return 'pong';
  }
}

const running: Running[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

/** An app whose TollgateModule options come from `options` (forRoot) with a global guard. */
function appWith(options: TollgateModuleOptions) {
  @Module({
    imports: [TollgateModule.forRoot(options)],
    controllers: [PingController],
    providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
  })
  class AppModule {}
  return AppModule;
}

describe('two Nest instances on one Redis', () => {
  let redis: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await redis.destroy();
  });

  /** The app's configuration, as a real app would inject it. */
  class Config {
    constructor(readonly redisPort: number) {}
  }

  /** One instance: its own Redis client and RedisStore, built by forRootAsync's factory from the injected Config. */
  function instance(clock: ManualClock) {
    @Module({ providers: [{ provide: Config, useValue: new Config(redis.port) }], exports: [Config] })
    class ConfigModule {}
    @Module({
      imports: [
        TollgateModule.forRootAsync({
          imports: [ConfigModule],
          inject: [Config],
          useFactory: (config: Config) => {
            const client = new Redis({ port: config.redisPort, host: '127.0.0.1' });
            clients.push(client);
            return { rules: [{ name: 'api', limit: 4, window: '1m' }], store: new RedisStore({ client, prefix: 'shared:', clock }), clock };
          },
        }),
      ],
      controllers: [PingController],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })
    class AppModule {}
    return AppModule;
  }

  it('share one budget: four requests spread over both are admitted, the fifth refused on either', async () => {
    const clock = new ManualClock(5_000_000);
    const a = await listen('express', instance(clock));
    const b = await listen('fastify', instance(clock));
    running.push(a, b);
    const statuses = [];
    for (const app of [a, b, a, b]) statuses.push((await app.get('/ping')).status);
    expect(statuses).toEqual([200, 200, 200, 200]);
    const refusedA = await a.get('/ping');
    const refusedB = await b.get('/ping');
    expect([refusedA.status, refusedB.status]).toEqual([429, 429]);
    expect(refusedB.headers.ratelimit).toMatch(/^"api";r=0;t=\d+$/);
  });
});

describe('contexts that are not HTTP', () => {
  @Controller()
  class Gateway {
    @Get('events')
    events() {}
    @SkipRateLimit()
    @Get('skipped')
    skipped() {}
  }

  it('are refused with TG_UNSUPPORTED_CONTEXT, unless the handler has @SkipRateLimit', async () => {
    const app = await NestFactory.createApplicationContext(appWith({ rules: [{ name: 'ip', rate: '10/min' }] }), { logger: false });
    try {
      const guard = new TollgateGuard(app.get(TollgateService));
      const ws = new ExecutionContextHost([{}, {}], Gateway, Gateway.prototype.events);
      ws.setType('ws');
      expect(() => guard.canActivate(ws)).toThrow(expect.objectContaining({ code: 'TG_UNSUPPORTED_CONTEXT' }));
      const graphql = new ExecutionContextHost([{}, {}, {}, {}], Gateway, Gateway.prototype.events);
      graphql.setType('graphql');
      expect(() => guard.canActivate(graphql)).toThrow(
        /TollgateGuard on Gateway\.events: expected an HTTP request, received a graphql context/,
      );
      const skipped = new ExecutionContextHost([{}, {}], Gateway, Gateway.prototype.skipped);
      skipped.setType('ws');
      expect(guard.canActivate(skipped)).toBe(true);
    } finally {
      await app.close();
    }
  });
});

describe('bad options', () => {
  it('fail where forRoot is called, a @nestjs/throttler option with a pointer to the mapping', () => {
    expect(() => TollgateModule.forRoot({ throttlers: [{ ttl: 60000, limit: 10 }] } as never)).toThrow(
      expect.objectContaining({ code: 'TG_UNKNOWN_OPTION', message: expect.stringMatching(/@nestjs\/throttler option/) }),
    );
  });

  it('a bad rule fails when the app is created (forRootAsync too)', async () => {
    @Module({
      imports: [TollgateModule.forRootAsync({ useFactory: async () => ({ rules: [{ name: 'ip', limit: 0, window: '1m' }] }) })],
      controllers: [PingController],
    })
    class AppModule {}
    await expect(NestFactory.create(AppModule, { logger: false, abortOnError: false })).rejects.toMatchObject({ code: 'TG_INVALID_LIMIT' });
  });
});
