/**
 * Options of `TollgateModule.forRoot()` and `@RateLimit()`, typed for Nest and validated by
 * core (`normalizeLimiterOptions`, `routeOptionsOf`) with Nest's wording.
 */
import type { Decision, RequestLike } from '@tollgate/core';
import {
  type AdapterWording,
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  type RateLimitSource,
  type RouteOptionsOf,
  routeOptionsOf,
} from '@tollgate/core/http';

/**
 * The request rules, `skip` and the other callbacks receive: Express' `Request` on Nest's
 * Express platform, Fastify's `FastifyRequest` on its Fastify platform, with whatever the
 * app's middleware and guards put on it (`req.user`).
 */
// biome-ignore lint/suspicious/noExplicitAny: what the app adds to its request is the app's to type
export type NestRequest = RequestLike & { rateLimit?: Decision; [name: string]: any };
/** Express' `Response` or Fastify's `FastifyReply`, as `@Res()` gives it. */
// biome-ignore lint/suspicious/noExplicitAny: the platform's response, typed by the app (`@Res() res: Response`)
export type NestResponse = any;
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
  // biome-ignore lint/suspicious/noExplicitAny: Nest's own ModuleMetadata['imports'] elements
  imports?: any[];
  /** Providers given to `useFactory`, in order (e.g. `ConfigService`). */
  // biome-ignore lint/suspicious/noExplicitAny: Nest's InjectionToken
  inject?: any[];
  /** @example useFactory: (config: ConfigService) => ({ rules, store: new RedisStore({ client: new Redis(config.get('REDIS_URL')) }) }) */
  // biome-ignore lint/suspicious/noExplicitAny: the injected providers, typed by the app
  useFactory: (...args: any[]) => TollgateModuleOptions | Promise<TollgateModuleOptions>;
}

const WORDING: AdapterWording = {
  path: 'TollgateModule',
  names: ['req', 'res', 'next'],
  handler: '(req, res, decision)',
  notObject: "Call TollgateModule.forRoot({ rules: [{ name: 'ip', rate: '100/min' }] }).",
  hint: (name) =>
    ['throttlers', 'ttl', 'limit', 'getTracker', 'storage', 'skipIf'].includes(name)
      ? `That is a @nestjs/throttler option; docs/nestjs.md maps each one to tollgate's (rules, key, store, skip).`
      : undefined,
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
  // biome-ignore lint/complexity/noBannedTypes: Nest's own type for handlers and classes
  getHandler(): Function;
  // biome-ignore lint/complexity/noBannedTypes: Nest's own type for handlers and classes
  getClass(): Function;
  getType<T extends string = string>(): T;
  // biome-ignore lint/suspicious/noExplicitAny: Nest's HttpArgumentsHost signatures
  switchToHttp(): { getRequest<T = any>(): T; getResponse<T = any>(): T };
}

/** The parts of Nest's `Reflector` the guard reads. */
export interface MetadataReader {
  // biome-ignore lint/suspicious/noExplicitAny: Nest's Reflector signatures
  get<T = any>(key: string, target: object): T;
  // biome-ignore lint/suspicious/noExplicitAny: Nest's Reflector signatures
  getAllAndOverride<T = any>(key: string, targets: object[]): T;
}

/** Nest's `Type<any>`: a class. */
// biome-ignore lint/suspicious/noExplicitAny: Nest's Type<any>
type NestType = new (...args: any[]) => any;

/** What `forRoot` and `forRootAsync` return: a Nest `DynamicModule`. */
export interface TollgateDynamicModule {
  module: NestType;
  global: boolean;
  // biome-ignore lint/suspicious/noExplicitAny: Nest's ModuleMetadata element types
  imports?: any[];
  // biome-ignore lint/suspicious/noExplicitAny: Nest's Provider
  providers: any[];
  // biome-ignore lint/suspicious/noExplicitAny: Nest's ModuleMetadata['exports'] element types
  exports: any[];
}
