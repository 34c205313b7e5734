/**
 * `TollgateModule.forRoot(options)` / `forRootAsync({ imports, inject, useFactory })`: a
 * global module providing `TollgateService` (the app's limiter: core's pipeline over the
 * Nest port, and the operations by key) to `TollgateGuard`, wherever the guard is bound.
 */
import { Module } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { KeyOperations, RuleChanges } from '@tollgate/core';
import { createRateLimit, type Decide, type RateLimitCore, type RouteMode } from '@tollgate/core/http';
import { isRoute, ownRules } from './decorators.js';
import {
  type NestNext,
  type NestRequest,
  type NestResponse,
  normalise,
  type TollgateDynamicModule,
  type TollgateModuleAsyncOptions,
  type TollgateModuleOptions,
} from './options.js';
import { nestPort } from './port.js';

/** The injection token of the options given to `forRoot` (or made by `forRootAsync`'s factory). */
export const TOLLGATE_OPTIONS = Symbol.for('tollgate.nestjs.options');

type Core = RateLimitCore<NestRequest, NestResponse, NestNext>;
type Named = { readonly name: string };

/**
 * The app's limiter, injectable anywhere: the operations by key (`get`, `reset`, `block`,
 * `unblock`, `penalize`, `reward`) over the app's and every `@RateLimit` rule, and `update`.
 * @example await tollgate.unblock('login', ipKey('203.0.113.7'))
 */
export interface TollgateService extends KeyOperations {}
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the operations are core's, assigned in the constructor
export class TollgateService {
  /** Core's pipeline for this app (for the guard). */
  readonly core: Core;
  private readonly stacks = new WeakMap<Named, WeakMap<Named, Decide<NestRequest, NestResponse, NestNext>>>();

  constructor(
    options: TollgateModuleOptions,
    // Nest's DiscoveryService, written structurally (see options.ts).
    private readonly discovery?: { getControllers(): { metatype: unknown }[] },
  ) {
    const o = normalise(options);
    const { handler } = o;
    this.core = createRateLimit(nestPort, o, {
      // Each handler gets its whole stack (core.stack), never a route stage (core.route).
      routeStages: false,
      ...(typeof handler === 'function' ? { handler: (req, res, _next, d) => handler(req, res, d) } : {}),
    });
    Object.assign(this, this.core.operations);
  }

  /**
   * Replaces a rule's `limit`, `burst`, `cost` or `blockFor` in place (app-level, tier or
   * `@RateLimit` rule); the next decisions use it and the rule's state is kept. Per process.
   * @example tollgate.update('pro', { limit: 10_000 })
   */
  update(ruleName: string, changes: RuleChanges<NestRequest>): void {
    this.core.update(ruleName, changes);
  }

  /**
   * A handler's decision, built once per controller class and handler (a handler may be
   * inherited): the app's stack, with the class's and the handler's `@RateLimit` rules
   * added (or, one with `mode: 'replace'`, standing instead of them).
   */
  decisionOf(cls: Named, handler: Named): Decide<NestRequest, NestResponse, NestNext> {
    let byHandler = this.stacks.get(cls);
    if (byHandler === undefined) {
      byHandler = new WeakMap();
      this.stacks.set(cls, byHandler);
    }
    let decide = byHandler.get(handler);
    if (decide === undefined) {
      const found = ownRules(cls, handler);
      const mode: RouteMode = found.some((o) => o.mode === 'replace') ? 'replace' : 'add';
      const lim =
        found.length === 0
          ? undefined
          : this.core.routeLimiter(
              found.flatMap((o) => o.rules),
              mode,
              `@RateLimit on ${cls.name}.${handler.name}`,
            );
      decide = lim === undefined ? this.core.handle : this.core.stack(lim);
      byHandler.set(handler, decide);
    }
    return decide;
  }

  /** Builds every route handler's stack at startup, so that a bad `@RateLimit` rule fails there. */
  onApplicationBootstrap(): void {
    const scanner = new MetadataScanner();
    for (const { metatype } of this.discovery?.getControllers() ?? []) {
      const proto = (metatype as { prototype?: Record<string, Named> } | null)?.prototype;
      if (proto === undefined) continue;
      for (const name of scanner.getAllMethodNames(proto)) {
        const handler = proto[name] as Named;
        if (isRoute(handler)) this.decisionOf(metatype as Named, handler);
      }
    }
  }

  /** Closes the store if tollgate created it (a store you pass is yours to close). */
  onModuleDestroy(): Promise<void> {
    return this.core.close();
  }
}

/** The module with its options' provider. */
function dynamic(options: object, imports: unknown[] = []): TollgateDynamicModule {
  const service = {
    provide: TollgateService,
    useFactory: (o: TollgateModuleOptions, discovery: DiscoveryService) => new TollgateService(o, discovery),
    inject: [TOLLGATE_OPTIONS, DiscoveryService],
  };
  const providers = [{ provide: TOLLGATE_OPTIONS, ...options }, service];
  return {
    module: TollgateModule,
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers,
    exports: [TollgateService, TOLLGATE_OPTIONS],
  };
}

/**
 * The module: import it once, in the root module; it is global.
 * @example
 * imports: [TollgateModule.forRoot({ rules: [{ name: 'ip', rate: '100/min' }] })],
 * providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
 */
// biome-ignore lint/complexity/noStaticOnlyClass: Nest's dynamic-module convention (TollgateModule.forRoot)
export class TollgateModule {
  static forRoot(options: TollgateModuleOptions): TollgateDynamicModule {
    // Validated here too, so that bad options fail where forRoot is called.
    normalise(options);
    return dynamic({ useValue: options });
  }

  /**
   * The options from a factory of injected providers, e.g. a `RedisStore` built from the
   * app's configuration.
   */
  static forRootAsync(options: TollgateModuleAsyncOptions): TollgateDynamicModule {
    return dynamic({ useFactory: options.useFactory, inject: options.inject ?? [] }, options.imports);
  }
}
Module({})(TollgateModule);
