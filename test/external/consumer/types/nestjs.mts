import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { RateLimit, SkipRateLimit, TollgateGuard, TollgateModule, TollgateService, user } from '@tollgate/nestjs';

// Decorators applied as functions: this program has no experimentalDecorators.
class Items {
  list() {
    return [];
  }
  health() {
    return 'ok';
  }
}
const list = Object.getOwnPropertyDescriptor(Items.prototype, 'list') as PropertyDescriptor;
Get()(Items.prototype, 'list', list);
RateLimit({ rules: [{ name: 'items', limit: 30, window: '1m' }] })(Items.prototype, 'list', list);
SkipRateLimit()(Items);
Controller('items')(Items);

class AppModule {}
Module({
  imports: [
    TollgateModule.forRoot({
      rules: [
        { name: 'ip', rate: '300/min' },
        { name: 'user', key: user((req) => req.user?.id), rate: '100/min' },
      ],
    }),
  ],
  controllers: [Items],
  providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
})(AppModule);

class AsyncModule {}
Module({
  imports: [TollgateModule.forRootAsync({ useFactory: async () => ({ rules: [{ name: 'ip', rate: '300/min' }] }) })],
})(AsyncModule);

const app = await NestFactory.create(AppModule, new ExpressAdapter());
const tollgate: TollgateService = app.get(TollgateService);
await tollgate.reset('ip', '203.0.113.7');

export { app };
