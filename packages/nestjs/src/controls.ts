/**
 * The controls beside the guard for Nest: `slowDown`, `concurrency`, `shed` and `limitRate`
 * as Nest middleware (`consumer.apply(...)` or `app.use`). Nest middleware get Node's request
 * and response on both platforms (Express' extend them; Fastify's are `request.raw` and
 * `reply.raw`), so the flows are core's on core's Node port (`@tollgate/core/node`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ShedOptions } from '@tollgate/core';
import {
  type ConcurrencyCarried,
  type ConcurrencyFlowOptions,
  controlMakers,
  type HttpPort,
  type LimitRateCarried,
  type LimitRateFlowOptions,
  type ShedCarried,
  type SlowDownCarried,
  type SlowDownFlowOptions,
} from '@tollgate/core/http';
import { type NodeNext, nodePort } from '@tollgate/core/node';

/** The request a Nest middleware receives: Express' `Request`, or Node's on the Fastify platform. */
export type NestMiddlewareRequest = IncomingMessage & { app?: { get(name: string): unknown } };
/** A Nest functional middleware, as `consumer.apply()` and `app.use()` take it. */
export type NestMiddlewareFunction = (req: NestMiddlewareRequest, res: ServerResponse, next: NodeNext) => void;

/** Options of `slowDown`: the throttle's (docs/slow-down.md), with functions of `req`. */
export type SlowDownOptions = SlowDownFlowOptions<NestMiddlewareRequest>;
/** Options of `concurrency`: the limit's (docs/concurrency.md), with functions of `req`. */
export type ConcurrencyMiddlewareOptions = ConcurrencyFlowOptions<NestMiddlewareRequest>;
/** Options of `limitRate`: the byte-rate limit's (docs/limit-rate.md), with functions of `req`. */
export type LimitRateOptions = LimitRateFlowOptions<NestMiddlewareRequest>;
/** The throttle as Nest middleware, with `reset(req)` and `close()`. */
export type SlowDownMiddleware = NestMiddlewareFunction & SlowDownCarried<NestMiddlewareRequest>;
/** The concurrency limit as Nest middleware, with its core `limit` and `close()`. */
export type ConcurrencyMiddleware = NestMiddlewareFunction & ConcurrencyCarried<NestMiddlewareRequest>;
/** Load shedding as Nest middleware, with its core `shedder` and `close()`. */
export type ShedMiddleware = NestMiddlewareFunction & ShedCarried<NestMiddlewareRequest>;
/** The byte-rate limit as Nest middleware, with its core `limit` and `close()`. */
export type LimitRateMiddleware = NestMiddlewareFunction & LimitRateCarried<NestMiddlewareRequest>;

const middlewarePort: HttpPort<NestMiddlewareRequest, ServerResponse, NodeNext> = {
  ...(nodePort as HttpPort<NestMiddlewareRequest, ServerResponse, NodeNext>),
  name: 'nestjs',
  // Express' `trust proxy` (the Fastify platform's raw request has no `app`).
  frameworkTrust: (req) => (typeof req.app?.get === 'function' ? req.app.get('trust proxy') : undefined),
};

const controls = controlMakers(middlewarePort, (name, stage, carried): NestMiddlewareFunction => {
  const middleware: NestMiddlewareFunction = (req, res, next) => stage(req, res, next);
  Object.defineProperty(middleware, 'name', { value: name });
  return Object.assign(middleware, carried);
});

/**
 * Delays requests from a key once it has sent more than `delayAfter` in `window`.
 * @example consumer.apply(slowDown({ window: '10s', delayAfter: 5, delay: 500 })).forRoutes('*');
 */
export const slowDown = controls.slowDown as (options: SlowDownOptions) => SlowDownMiddleware;

/**
 * Limits the requests in flight per key (429) and/or in total (503).
 * @example consumer.apply(concurrency({ max: 2, global: 50, queue: 10, queueTimeout: '5s' })).forRoutes('reports');
 */
export const concurrency = controls.concurrency as (options: ConcurrencyMiddlewareOptions) => ConcurrencyMiddleware;

/**
 * Answers 503 with `Retry-After` while the server is overloaded; apply it first.
 * @example consumer.apply(shed({ maxInFlight: 500, maxEventLoopDelay: '200ms' })).forRoutes('*');
 */
export const shed = controls.shed as (options: ShedOptions<NestMiddlewareRequest>) => ShedMiddleware;

/**
 * Paces response bodies with a token bucket on bytes per key (all of a client's responses
 * share it); refuses nothing.
 * @example consumer.apply(limitRate({ rate: '2MB/s', burst: '16MB' })).forRoutes('downloads');
 */
export const limitRate = controls.limitRate as (options: LimitRateOptions) => LimitRateMiddleware;
