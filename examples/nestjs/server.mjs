// A Nest app with a global TollgateGuard: the app's rule `ip` (3 per minute per client
// address) and the `items` rule of GET /items (5 per minute), decided as one stack;
// GET /healthz is exempt. PLATFORM=fastify runs it on Nest's Fastify platform.
// Run: pnpm --filter @tollgate-examples/nestjs start (see README.md).
// Plain JavaScript, so Nest's decorators are applied as functions (`Reflect.decorate`);
// in TypeScript they are the usual `@Controller()`, `@Get()`, `@RateLimit()`.
import 'reflect-metadata';
import { Controller, Get, Module, Req } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimit, SkipRateLimit, TollgateGuard, TollgateModule } from '@tollgate/nestjs';

class ItemsController {
  items(req) {
    return { items: ['a', 'b'], remaining: req.rateLimit?.rules.map((r) => `${r.name}: ${r.remaining}`) };
  }
  health() {
    return 'ok';
  }
}
const method = (name) => Object.getOwnPropertyDescriptor(ItemsController.prototype, name);
Reflect.decorate(
  [Get('items'), RateLimit({ rules: [{ name: 'items', limit: 5, window: '1m' }] })],
  ItemsController.prototype,
  'items',
  method('items'),
);
Req()(ItemsController.prototype, 'items', 0);
Reflect.decorate([Get('healthz'), SkipRateLimit()], ItemsController.prototype, 'health', method('health'));
Reflect.decorate([Controller()], ItemsController);

class AppModule {}
Reflect.decorate(
  [
    Module({
      imports: [
        TollgateModule.forRoot({
          rules: [{ name: 'ip', limit: 3, window: '1m' }],
          // Behind nginx or a load balancer on this machine, name it here (docs/keys-and-proxies.md).
          trustProxy: process.env.TRUST_PROXY ?? false,
        }),
      ],
      controllers: [ItemsController],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    }),
  ],
  AppModule,
);

const platform = process.env.PLATFORM === 'fastify' ? 'fastify' : 'express';
const app = await NestFactory.create(AppModule, platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter(), {
  logger: ['error'],
});
await app.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1');
const { port } = app.getHttpServer().address();
console.log(`nestjs (${platform}) listening on http://localhost:${port}/`);
