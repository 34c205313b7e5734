/**
 * Options of `TollgateModule.forRoot()` and `@RateLimit()`, typed for Nest and validated by
 * core (`normalizeLimiterOptions`, `routeOptionsOf`) with Nest's wording.
 */
import type { Decision, RequestLike } from '@tollgate/core';
import {
  type AdapterWording,
  type LimiterOptionsOf,
  NESTJS_THROTTLER_OPTIONS,
  normalizeLimiterOptions,
  peerHint,
  type RateLimitSource,
  type RouteOptionsOf,
  routeOptionsOf,
} from '@tollgate/core/http';

// biome-ignore lint/suspicious/noExplicitAny: Nest's own loose types (Type<any>, Provider, InjectionToken) and the app's request fields
type Any = any;

/**
 * The request rules, `skip` and the other callbacks receive: Express' `Request` on Nest's
 * Express platform, Fastify's `FastifyRequest` on its Fastify platform, with whatever the
 * app's middleware and guards put on it (`req.user`).
 */
export type NestRequest = RequestLike & { rateLimit?: Decision; [name: string]: Any };
/** Express' `Response` or Fastify's `FastifyReply`, as `@Res()` gives it. */
export type NestResponse = Any;
/** How the guard lets a request on (`next()`) or fails it (`next(err)`, to Nest's exception filters). */
export type NestNext = (err?: unknown) => void;

export interface TollgateModuleOptions extends LimiterOptionsOf<NestRequest, NestResponse, NestNext> {
  /**
   * Answers refused requests yourself, with the platform's response (Express `res.send`,
   * Fastify `reply.send`). Status, `Retry-After` and the rate-limit headers are already set.
   */
  handler?: (req: NestRequest, res: NestResponse, decision: Decision) => unknown;
}

/**
 * `@RateLimit()`'s options: rules added to the app's (one all-or-nothing decision), or with
 * `mode: 'replace'` standing instead of them. A controller's and a handler's rules add up.
 */
export type RateLimitOptions = RouteOptionsOf<NestRequest>;

/** What `forRootAsync` takes: a factory of the options, with Nest's `imports` and `inject`. */
export interface TollgateModuleAsyncOptions {
  /** Modules whose providers the factory needs (e.g. `ConfigModule`). */
  imports?: Any[];
  /** Providers given to `useFactory`, in order (e.g. `ConfigService`). */
  inject?: Any[];
  /** @example useFactory: (config: ConfigService) => ({ rules, store: new RedisStore({ client: new Redis(config.get('REDIS_URL')) }) }) */
  useFactory: (...args: Any[]) => TollgateModuleOptions | Promise<TollgateModuleOptions>;
}

const WORDING: AdapterWording = {
  path: 'TollgateModule',
  names: ['req', 'res', 'next'],
  handler: '(req, res, decision)',
  notObject: "Call TollgateModule.forRoot({ rules: [{ name: 'ip', rate: '100/min' }] }).",
  hint: peerHint('@nestjs/throttler', NESTJS_THROTTLER_OPTIONS),
  emptyRules: 'an array of rules (empty to limit only handlers with @RateLimit)',
};

/** Validates the module's options; rules themselves are validated by the core limiter. */
export function normalise(options: TollgateModuleOptions): RateLimitSource<NestRequest, TollgateModuleOptions> {
  return normalizeLimiterOptions<NestRequest, TollgateModuleOptions>(options, WORDING);
}

/** Validates `@RateLimit()`'s options when the decorator is applied. */
export function rateLimitOption(value: unknown): Required<RateLimitOptions> {
  return routeOptionsOf<NestRequest>(value, {
    path: '@RateLimit',
    expected: 'an options object { rules, mode? }',
    fix: "Write @RateLimit({ rules: [{ name: 'login', limit: 5, window: '15m' }] }); other options come from TollgateModule.forRoot.",
  });
}

// The Nest types the public declarations use are written out structurally (Nest's own are
// assignable to them): Nest 12 is ESM only, and declarations that imported its types
// would fail a CommonJS program on `module: node16` (TS1479) even where it never uses Nest's.

/** The parts of Nest's `ExecutionContext` the guard reads. */
export interface GuardContext {
  getHandler(): { readonly name: string };
  getClass(): { readonly name: string };
  getType<T extends string = string>(): T;
  switchToHttp(): { getRequest<T = Any>(): T; getResponse<T = Any>(): T };
}

/** What `forRoot` and `forRootAsync` return: a Nest `DynamicModule`. */
export interface TollgateDynamicModule {
  module: new (...args: Any[]) => Any;
  global: boolean;
  imports?: Any[];
  providers: Any[];
  exports: Any[];
}
