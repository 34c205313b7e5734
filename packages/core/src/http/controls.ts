/**
 * The request flows of the controls beside the limiter, written
 * once for every framework: `slowDown` (count, headers if asked, hold), `concurrency`
 * (take a slot while the client waits, answer, release once when the request is over)
 * and `shed` (decide at once, count in flight until the request is over). Deciding is
 * the core controls' (`createThrottle`, `createConcurrency`, `createShedder`); adapters
 * reach the framework through their {@link HttpPort}.
 *
 * A store that fails lets the request through (a control slows or limits, it never
 * takes the site down); a callback of the app that throws, rejects or returns the wrong
 * type is the app's error and goes to the framework's error handler.
 */
import { isAppError } from '../app-errors.js';
import type { ByteRateLimit } from '../controls/byte-rate.js';
import {
  type ConcurrencyLimit,
  type ConcurrencyOptions,
  type ConcurrencyOutcome,
  concurrencyDecision,
  concurrencyHeaderFields,
  concurrencyRefusal,
  createConcurrency,
} from '../controls/concurrency.js';
import { publishControl } from '../controls/publish.js';
import { createShedder, type Shedder, type ShedOptions, shedDecision, shedRefusal } from '../controls/shed.js';
import { createThrottle, type Throttle, type ThrottleOptions, type ThrottleResult, throttleDecision } from '../controls/throttle.js';
import type { Timers } from '../controls/timers.js';
import { publishStoreError } from '../diagnostics.js';
import { compileHeaders, type HeadersOption } from '../headers.js';
import { type ClientAddressOptions, splitClientAddress } from '../http-options.js';
import type { TrustProxy } from '../keys.js';
import { type AccessList, compileAccess } from './access.js';
import { holdRequest } from './lifetime.js';
import { type LimitRateFlowOptions, limitRateFlow } from './limit-rate.js';
import { dropHeld, type HttpPort, localsOf, readerMark, refusedAfterHead, sendRefusal, writeFields } from './port.js';

/** A control as a request handler in the framework's continuation style. */
export type Stage<Req, Res, Next> = (req: Req, res: Res, next: Next) => void;

export interface SlowDownFlowOptions<Req> extends Omit<ThrottleOptions<Req>, 'defaultKey'>, ClientAddressOptions {
  /**
   * Rate-limit headers carrying the throttle's figures. Off by default: a throttle never
   * refuses, and a `RateLimit` item at `r=0` would tell RateLimit-aware clients to stop.
   * With headers on, the items describe the delay-free budget (`q` = delayAfter) and `r`
   * never reaches 0 on a response that was only delayed (see docs/slow-down.md).
   * @default false
   */
  headers?: HeadersOption;
  /** Where delays get their timers (tests: `ManualTimers`). @default systemTimers */
  timers?: Timers;
  /**
   * Clients never delayed nor counted: addresses and CIDRs matched on the client address
   * as the default key finds it with `trustProxy`, or a function `(req) => boolean`.
   * @example allow: ['10.0.0.0/8']
   */
  allow?: AccessList<Req>;
}

export interface ConcurrencyFlowOptions<Req> extends Omit<ConcurrencyOptions<Req>, 'defaultKey'>, ClientAddressOptions {
  /** Send draft-10 items with `qu="concurrent-requests"`. @default true */
  headers?: boolean;
  /**
   * Clients that take no slot: addresses and CIDRs matched on the client address as the
   * default key finds it with `trustProxy`, or a function `(req) => boolean`.
   * @example allow: ['10.0.0.0/8']
   */
  allow?: AccessList<Req>;
}

/** `stage` read through the port when its requests are not Node-shaped (the key functions' default). */
function reading<Req, Res, Next>(port: HttpPort<Req, Res, Next>, stage: Stage<Req, Res, Next>): Stage<Req, Res, Next> {
  const mark = readerMark(port);
  if (mark === undefined) return stage;
  return (req, res, next) => {
    mark(req);
    stage(req, res, next);
  };
}

/** `stage` behind a control's `allow` list: a listed client passes on untouched. */
function allowing<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  allow: unknown,
  o: { path: string; trustProxy?: TrustProxy | undefined },
  stage: Stage<Req, Res, Next>,
): Stage<Req, Res, Next> {
  const access = compileAccess<Req>(allow, undefined, o);
  if (access === undefined) return reading(port, stage);
  return reading(port, (req, res, next) =>
    access(
      req,
      (verdict) => (verdict === 'allow' ? port.pass(next) : stage(req, res, next)),
      (err) => port.fail(next, err),
    ),
  );
}

/**
 * The slow-down throttle's flow.
 * @example const { stage, throttle } = slowDownFlow(port, { window: '10s', delayAfter: 5, delay: 500 })
 */
export function slowDownFlow<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  options: SlowDownFlowOptions<Req>,
): { stage: Stage<Req, Res, Next>; throttle: Throttle<Req>; close(): Promise<void> } {
  const { headers, timers, allow, ...rest } = options ?? ({} as SlowDownFlowOptions<Req>);
  const [core, defaultKey] = splitClientAddress<Req, typeof rest>(rest);
  const throttle = createThrottle<Req>({ ...core, defaultKey } as ThrottleOptions<Req>);
  const format = headers === undefined ? undefined : compileHeaders(headers);
  const clock = core.clock;
  const locals = localsOf(port);

  function proceed(req: Req, res: Res, next: Next, t: ThrottleResult | undefined): void {
    if (t === undefined) {
      port.pass(next);
      return;
    }
    locals(req).slowDown = t;
    const at = clock?.now() ?? Date.now();
    if (format !== undefined) {
      // A delayed response is still admitted: never `r=0`, which announces a refusal.
      const result = t.result.remaining > 0 ? t.result : { ...t.result, remaining: 1 };
      writeFields(port, res, format([result], at));
    }
    publishControl(req, throttle.name, () => throttleDecision(t, at));
    if (t.delayMs === 0) {
      port.pass(next);
      return;
    }
    // A client that leaves while delayed never reaches the handler.
    holdRequest(port, req, res, t.delayMs, timers)
      .then((stillThere) => {
        if (stillThere) port.pass(next);
        else dropHeld(port, next);
      })
      .catch((err: unknown) => port.fail(next, err));
  }

  const stage: Stage<Req, Res, Next> = (req, res, next) => {
    throttle
      .hit(req)
      .then(
        (t) => proceed(req, res, next, t),
        (err) => {
          if (isAppError(err)) {
            port.fail(next, err);
            return;
          }
          // It slows, it never blocks: a failing store lets the request through undelayed.
          publishStoreError(err, req, throttle.name, 'allow');
          port.pass(next);
        },
      )
      // A port operation that throws on this promise's branch (a mock request): the app's error, never unhandled.
      .catch((err: unknown) => port.fail(next, err));
  };
  const guarded = allowing(port, allow, { path: 'slowDown', trustProxy: rest.trustProxy }, stage);
  return { stage: guarded, throttle, close: () => throttle.close() };
}

/**
 * The concurrency limit's flow: a slot is taken while the client is still there and
 * released exactly once when the request is over (finished, closed, or abandoned with
 * its connection, pipelined requests included).
 */
export function concurrencyFlow<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  options: ConcurrencyFlowOptions<Req>,
): { stage: Stage<Req, Res, Next>; limit: ConcurrencyLimit<Req>; close(): Promise<void> } {
  const { headers = true, allow, ...rest } = options ?? ({} as ConcurrencyFlowOptions<Req>);
  const [core, defaultKey] = splitClientAddress<Req, typeof rest>(rest);
  const limit = createConcurrency<Req>({ ...core, defaultKey } as ConcurrencyOptions<Req>);

  function answer(req: Req, res: Res, next: Next, o: ConcurrencyOutcome | undefined): void {
    if (o === undefined) {
      port.pass(next);
      return;
    }
    if (!o.admitted && o.reason === 'aborted') {
      dropHeld(port, next); // the client is gone: nothing to answer
      return;
    }
    publishControl(req, limit.name, () => concurrencyDecision(o));
    if (!o.admitted) {
      if (refusedAfterHead(port, res, next)) return;
      if (headers) writeFields(port, res, concurrencyHeaderFields(o.figures));
      sendRefusal(port, res, concurrencyRefusal(o));
      return;
    }
    if (port.isGone(req, res)) {
      o.release();
      dropHeld(port, next);
      return;
    }
    port.onceOver(req, res, o.release);
    if (headers) writeFields(port, res, concurrencyHeaderFields(o.figures));
    port.pass(next);
  }

  const stage: Stage<Req, Res, Next> = (req, res, next) => {
    // Give up waiting in the queue as soon as the client goes away.
    const abort = new AbortController();
    let stop: () => void;
    try {
      stop = port.whenGone(req, res, () => abort.abort());
    } catch (err) {
      // A request or response without the runtime's events (a mock): the app's error, never a throw out of the stage.
      port.fail(next, err);
      return;
    }
    limit.acquire(req, abort.signal).then(
      (o) => {
        stop();
        answer(req, res, next, o);
      },
      (err) => {
        stop();
        if (isAppError(err)) {
          port.fail(next, err);
          return;
        }
        publishStoreError(err, req, limit.name, 'allow');
        answer(req, res, next, undefined);
      },
    );
  };
  const guarded = allowing(port, allow, { path: 'concurrency', trustProxy: rest.trustProxy }, stage);
  return { stage: guarded, limit, close: () => limit.close() };
}

/** Load shedding's flow: decided at once, in flight until the request is over. */
export function shedFlow<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  options: ShedOptions<Req>,
): { stage: Stage<Req, Res, Next>; shedder: Shedder<Req>; close(): void } {
  const shedder = createShedder<Req>(options);
  const stage: Stage<Req, Res, Next> = (req, res, next) => {
    let o: ReturnType<Shedder<Req>['check']>;
    try {
      o = shedder.check(req);
    } catch (err) {
      port.fail(next, err);
      return;
    }
    if (o === undefined) {
      port.pass(next);
      return;
    }
    if (o.shed) {
      publishControl(req, 'shed', () => shedDecision(o));
      if (refusedAfterHead(port, res, next)) return;
      sendRefusal(port, res, shedRefusal(o));
      return;
    }
    try {
      port.onceOver(req, res, o.release);
    } catch (err) {
      // A request or response without the runtime's events (a mock): counted out again, handed to the error handler.
      o.release();
      port.fail(next, err);
      return;
    }
    if (port.isGone(req, res)) dropHeld(port, next);
    else port.pass(next);
  };
  return { stage: reading(port, stage), shedder, close: () => shedder.close() };
}

/** The controls by name, as a route's opt-out and a handler's name spell them. */
export type ControlName = 'slowDown' | 'concurrency' | 'shed' | 'limitRate';

/** What the slow-down throttle's handler carries. */
export interface SlowDownCarried<Req> {
  /** Forgets the request key's arrivals. */
  reset(req: Req): Promise<void>;
  /** Closes the store if the throttle created it. */
  close(): Promise<void>;
}

/** What the concurrency limit's handler carries. */
export interface ConcurrencyCarried<Req> {
  /** The core limit (for `count`, `held`, `waiting`). */
  readonly limit: ConcurrencyLimit<Req>;
  /** Refuses waiters, stops timers, closes a store it created. */
  close(): Promise<void>;
}

/** What load shedding's handler carries. */
export interface ShedCarried<Req> {
  /** The core shedder (for `inFlight` and `pressure()`). */
  readonly shedder: Shedder<Req>;
  /** Stops the event-loop monitor. */
  close(): void;
}

/** What limitRate's handler carries. */
export interface LimitRateCarried<Req> {
  /** The core byte-rate limit (for `after`, `figures`). */
  readonly limit: ByteRateLimit<Req>;
  /** Closes the store if the control created it. */
  close(): Promise<void>;
}

/** What a control's handler carries beside itself: `close`, and the throttle's `reset`, the limit or the shedder. */
export type ControlCarried<Req> = SlowDownCarried<Req> | ConcurrencyCarried<Req> | ShedCarried<Req> | LimitRateCarried<Req>;

/**
 * The controls over one port: each maker runs its control's flow and hands `mount`
 * the control's name, its stage and what the handler may carry; `mount` returns the
 * adapter's handler (middleware, a hook).
 * @example const controls = controlMakers(port, (name, stage, { close }) => Object.assign((req, res, next) => stage(req, res, next), { close }))
 */
export function controlMakers<Req, Res, Next, H>(
  port: HttpPort<Req, Res, Next>,
  mount: (name: ControlName, stage: Stage<Req, Res, Next>, carried: ControlCarried<Req>) => H,
): {
  slowDown(options: SlowDownFlowOptions<Req>): H;
  concurrency(options: ConcurrencyFlowOptions<Req>): H;
  shed(options: ShedOptions<Req>): H;
  limitRate(options: LimitRateFlowOptions<Req>): H;
} {
  return {
    slowDown(options) {
      const { stage, throttle, close } = slowDownFlow(port, options);
      return mount('slowDown', stage, { reset: (req) => throttle.reset(req), close });
    },
    concurrency(options) {
      const { stage, limit, close } = concurrencyFlow(port, options);
      return mount('concurrency', stage, { limit, close });
    },
    shed(options) {
      const { stage, shedder, close } = shedFlow(port, options);
      return mount('shed', stage, { shedder, close });
    },
    limitRate(options) {
      const { stage, limit, close } = limitRateFlow(port, options);
      return mount('limitRate', stage, { limit, close });
    },
  };
}
