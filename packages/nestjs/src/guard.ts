/**
 * `TollgateGuard`: a handler's stack (the app's rules plus its controller's and its own
 * `@RateLimit` rules) decided as one all-or-nothing decision. A guard answers only "go on" or "no": a refusal (429, 403, 503) is sent by the guard
 * itself through the platform's response, with core's headers and problem body, and the
 * guard's promise is then left unsettled, so Nest neither runs the handler nor sends an
 * answer of its own (docs/decisions.md, "NestJS").
 */
import { Inject, Injectable } from '@nestjs/common';
import { configError } from '@tollgate/core';
import { skipped } from './decorators.js';
import { TollgateService } from './module.js';
import type { GuardContext, NestRequest, NestResponse } from './options.js';

/**
 * Rate-limits HTTP requests: global (`{ provide: APP_GUARD, useClass: TollgateGuard }`) or
 * per controller (`@UseGuards(TollgateGuard)`). The decision is on the request
 * (`req.rateLimit`).
 */
export class TollgateGuard {
  constructor(private readonly tollgate: TollgateService) {}

  canActivate(context: GuardContext): boolean | Promise<boolean> {
    const handler = context.getHandler();
    const cls = context.getClass();
    if (skipped(cls, handler)) return true;
    const type = context.getType<string>();
    if (type !== 'http') {
      throw configError('TG_UNSUPPORTED_CONTEXT', {
        path: `TollgateGuard on ${cls.name}.${handler.name}`,
        expected: 'an HTTP request',
        received: `a ${type} context`,
        fix: 'Put @SkipRateLimit() on it (or its class), or bind TollgateGuard per controller with @UseGuards instead of globally.',
      });
    }
    const decide = this.tollgate.decisionOf(cls, handler);
    const http = context.switchToHttp();
    const req = http.getRequest<NestRequest>();
    const res = http.getResponse<NestResponse>();
    return new Promise<boolean>((resolve, reject) => {
      // Only "go on" and failures settle: a refusal is already answered (see above).
      decide(req, res, (err) => (err === undefined ? resolve(true) : reject(err)));
    });
  }
}
Injectable()(TollgateGuard);
// Explicit tokens: Nest needs no emitted design types to build the guard.
Inject(TollgateService)(TollgateGuard, undefined, 0);
