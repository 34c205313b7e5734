/**
 * @tollgate/nestjs — the NestJS module, guard and decorators, on Nest's Express and Fastify
 * platforms.
 *
 * `TollgateModule.forRoot(options)` (or `forRootAsync`), `TollgateGuard` (global through
 * `APP_GUARD` or per controller), `@RateLimit({ rules })` and `@SkipRateLimit()`; the controls
 * `slowDown`, `concurrency`, `shed` and `limitRate` as Nest middleware; the key
 * extractors and the types users write rules with, re-exported so an app needs one import.
 */
export * from '@tollgate/core/essentials';
export type {
  ConcurrencyMiddleware,
  ConcurrencyMiddlewareOptions,
  LimitRateMiddleware,
  LimitRateOptions,
  NestMiddlewareFunction,
  NestMiddlewareRequest,
  ShedMiddleware,
  SlowDownMiddleware,
  SlowDownOptions,
} from './controls.js';
export { concurrency, limitRate, shed, slowDown } from './controls.js';
export { RateLimit, SkipRateLimit } from './decorators.js';
export { TollgateGuard } from './guard.js';
export { TOLLGATE_OPTIONS, TollgateModule, TollgateService } from './module.js';
export type {
  GuardContext,
  NestNext,
  NestRequest,
  NestResponse,
  RateLimitOptions,
  TollgateDynamicModule,
  TollgateModuleAsyncOptions,
  TollgateModuleOptions,
} from './options.js';
