/**
 * `@RateLimit({ rules })` and `@SkipRateLimit()`, and how their metadata is read (Nest's
 * `SetMetadata`, on `reflect-metadata`, which Nest loads).
 */
import { SetMetadata } from '@nestjs/common';
import { type RateLimitOptions, rateLimitOption } from './options.js';

const RULES = 'tollgate:rate-limit';
const SKIP = 'tollgate:skip';

/**
 * Rules for a controller or a handler, added to the app's (or, `mode: 'replace'`, standing
 * instead of them); a controller's and a handler's rules add up.
 * @example @RateLimit({ rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] })
 */
export function RateLimit(options: RateLimitOptions): ClassDecorator & MethodDecorator {
  return SetMetadata(RULES, rateLimitOption(options));
}

/**
 * Exempts a controller or a handler from the guard (health checks; GraphQL resolvers and
 * WebSocket gateways under a global guard).
 * @example @SkipRateLimit() @Get('healthz') health() {}
 */
export function SkipRateLimit(): ClassDecorator & MethodDecorator {
  return SetMetadata(SKIP, true);
}

const read = (key: string, target: object): unknown =>
  (Reflect as unknown as { getMetadata(k: string, t: object): unknown }).getMetadata(key, target);

/** Whether a handler or its class has `@SkipRateLimit()`. */
export const skipped = (cls: object, handler: object): boolean => read(SKIP, handler) === true || read(SKIP, cls) === true;

/** The `@RateLimit` options of a controller class and of a handler, the class's first. */
export const ownRules = (cls: object, handler: object): Required<RateLimitOptions>[] =>
  [read(RULES, cls), read(RULES, handler)].filter((o): o is Required<RateLimitOptions> => o !== undefined);

/** Whether a method is a route handler (Nest's `PATH_METADATA`). */
export const isRoute = (handler: object): boolean => read('path', handler) !== undefined;
