/**
 * Load shedding, framework-agnostic and synchronous: the decision reads
 * only counters held in the process, so it is made before anything expensive.
 *
 * Pressure is `max(inFlight / maxInFlight, loopDelay / maxEventLoopDelay)`. Each request
 * has a threshold; it is shed (503 + Retry-After) when the pressure has reached it:
 *
 * - a request of priority `p` (0 to 1, clamped; higher is kept longer) from a tenant at
 *   or under its fair share: `1 - headroom·(1 - p)`. Priority 1 is shed only at full
 *   pressure (so `maxInFlight` is a hard ceiling), priority 0 from `1 - headroom`.
 * - the same request from a tenant over its fair share: `1 - headroom·(3 - p)`, two
 *   bands lower: over-share tenants are shed before any tenant under its share.
 *
 * Fair share: the capacity (`maxInFlight`, or the current in-flight count plus one when
 * only event-loop delay is watched) divided by the number of active tenants — those
 * with an arrival or a finished request within the last `tenantWindow`. A tenant is
 * over its share when admitting this request would put its in-flight count above it.
 * Memory is bounded: at most `maxTenants` recent tenants are remembered.
 *
 * What this guarantees: requests from tenants under their share are shed only from
 * `1 - headroom` of capacity (at priority 1: only at full capacity), while over-share
 * tenants stop being admitted at `1 - 2·headroom` at the latest; so at least
 * `headroom` of the capacity (20% by default; 40% for priority-1 requests) stays for
 * the small tenants however hard one tenant floods.
 */
import { callbackResultError, guardAppFn } from '../app-errors.js';
import { type Clock, systemClock } from '../clock.js';
import { publishInFlight } from '../diagnostics.js';
import type { Duration } from '../duration.js';
import { configError, describe } from '../errors.js';
import { sanitizeKey } from '../limiter.js';
import { capacityRefusal, type Refusal } from '../response.js';
import type { KeyFn } from '../rules.js';
import type { Decision, RuleResult } from '../types.js';
import { type LoopDelaySource, monitorLoopDelay } from './event-loop.js';
import { boundedDuration, checkOptions, MAX_TIMER_MS, optionalFn, wholeNumber } from './options.js';
import { controlDecision } from './publish.js';

export interface ShedOptions<R = unknown> {
  /**
   * Most requests in flight in this process before shedding.
   * @example 200
   */
  maxInFlight?: number;
  /**
   * Event-loop delay (99th percentile over the last reading interval) at which to shed.
   * @example '100ms'
   */
  maxEventLoopDelay?: Duration;
  /**
   * A request's priority, from 0 (shed first) to 1 (shed last).
   * @default () => 1
   * @example (req) => (req.url.startsWith('/checkout') ? 1 : 0.3)
   */
  priority?: (req: R) => number;
  /**
   * The tenant a request belongs to, for fair shedding; `undefined` means none.
   * @example (req) => req.headers['x-tenant']
   */
  tenant?: KeyFn<R>;
  /**
   * `Retry-After` of a shed response.
   * @default '1s'
   */
  retryAfter?: Duration;
  /**
   * Fraction of capacity (0 to 0.25) over which low priorities and over-share tenants
   * give way, see the module comment.
   * @default 0.2
   */
  headroom?: number;
  /**
   * A tenant stays active this long after its last arrival.
   * @default '1s'
   */
  tenantWindow?: Duration;
  /**
   * Most tenants remembered as recently active.
   * @default 10_000
   */
  maxTenants?: number;
  /** Requests for which this returns true are never shed nor counted. */
  skip?: (req: R) => boolean;
  /** Time source for tenant activity. @default systemClock */
  clock?: Clock;
  /**
   * Where the event-loop delay comes from.
   * @default monitorLoopDelay() when maxEventLoopDelay is set
   */
  loopDelay?: LoopDelaySource;
}

export type ShedOutcome =
  | { shed: false; pressure: number; release: () => void }
  | { shed: true; pressure: number; reason: 'in-flight' | 'event-loop-delay'; retryAfterMs: number };

export interface Shedder<R = unknown> {
  /** Decides at once; call `release` of an admitted outcome exactly when the response is over. */
  check(req: R): ShedOutcome | undefined;
  /** Requests admitted and not yet released. */
  readonly inFlight: number;
  /** The current pressure (1 = at capacity). */
  pressure(): number;
  /** Stops the event-loop monitor it started. */
  close(): void;
}

const KNOWN = [
  'maxInFlight',
  'maxEventLoopDelay',
  'priority',
  'tenant',
  'retryAfter',
  'headroom',
  'tenantWindow',
  'maxTenants',
  'skip',
  'clock',
  'loopDelay',
] as const;

/** A shedder's options, validated once, with their defaults; the callbacks read and checked per request. */
interface ShedSettings<R> {
  readonly maxInFlight: number | undefined;
  readonly maxLag: number | undefined;
  readonly headroom: number;
  readonly retryAfterMs: number;
  readonly tenantWindowMs: number;
  readonly maxTenants: number;
  readonly clock: Clock;
  readonly loop: LoopDelaySource | undefined;
  /** Whether the loop-delay monitor is the shedder's own (closed with it). */
  readonly ownMonitor: boolean;
  readonly readers: RequestReaders<R>;
}

/** The per-request callbacks, each result checked (a wrong one is the app's error). */
interface RequestReaders<R> {
  priorityOf(req: R): number;
  /** undefined: no tenant (also when no `tenant` option is given). */
  tenantOf(req: R): string | undefined;
  skipped(req: R): boolean;
}

function shedSettings<R>(options: ShedOptions<R>, path: string): ShedSettings<R> {
  checkOptions(options, KNOWN, path);
  const o = options as ShedOptions<R>;
  const maxInFlight = o.maxInFlight === undefined ? undefined : wholeNumber(o.maxInFlight, `${path}.maxInFlight`, 1);
  const maxLag =
    o.maxEventLoopDelay === undefined ? undefined : boundedDuration(o.maxEventLoopDelay, `${path}.maxEventLoopDelay`, MAX_TIMER_MS);
  if (maxInFlight === undefined && maxLag === undefined) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'maxInFlight, maxEventLoopDelay, or both',
      received: 'neither',
      fix: "Pass e.g. { maxInFlight: 200 } or { maxEventLoopDelay: '100ms' }.",
    });
  }
  const headroom = o.headroom ?? 0.2;
  if (typeof headroom !== 'number' || !(headroom >= 0 && headroom <= 0.25)) {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.headroom`,
      expected: 'a fraction from 0 to 0.25',
      received: describe(headroom),
      fix: 'Use e.g. 0.2: low priorities and over-share tenants give way from 80% of capacity.',
    });
  }
  const retryAfterMs = o.retryAfter === undefined ? 1000 : boundedDuration(o.retryAfter, `${path}.retryAfter`, MAX_TIMER_MS);
  const tenantWindowMs = o.tenantWindow === undefined ? 1000 : boundedDuration(o.tenantWindow, `${path}.tenantWindow`, MAX_TIMER_MS);
  const maxTenants = o.maxTenants === undefined ? 10_000 : wholeNumber(o.maxTenants, `${path}.maxTenants`, 1);
  const readers = requestReaders(o, path);
  const ownMonitor = o.loopDelay === undefined && maxLag !== undefined;
  // Last: the monitor it starts is the shedder's to close, so no option may fail after it.
  const loop = o.loopDelay ?? (maxLag !== undefined ? monitorLoopDelay() : undefined);
  const clock = o.clock ?? systemClock;
  return { maxInFlight, maxLag, headroom, retryAfterMs, tenantWindowMs, maxTenants, clock, loop, ownMonitor, readers };
}

function requestReaders<R>(o: ShedOptions<R>, path: string): RequestReaders<R> {
  // Guarded: whatever they throw is the app's error (the framework's error handler).
  const priorityFn = guarded(optionalFn<(req: R) => number>(o.priority, `${path}.priority`, '(req) => number'));
  const tenantFn = guarded(optionalFn<KeyFn<R>>(o.tenant, `${path}.tenant`, '(req) => string | undefined'));
  const skip = guarded(optionalFn<(req: R) => boolean>(o.skip, `${path}.skip`, '(req) => boolean'));
  return {
    priorityOf(req) {
      if (priorityFn === undefined) return 1;
      const p = priorityFn(req);
      if (typeof p !== 'number') throw wrongResult(`${path}.priority`, 'a number from 0 to 1 (not a promise)', p);
      // A number out of range is clamped; NaN sheds the request first rather than last.
      return p >= 0 ? Math.min(1, p) : 0;
    },
    tenantOf(req) {
      if (tenantFn === undefined) return undefined;
      const raw = tenantFn(req) as unknown;
      if (raw === undefined || raw === null) return undefined;
      if (typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'bigint') return sanitizeKey(String(raw));
      throw wrongResult(`${path}.tenant`, 'a tenant id (string or number), undefined or null (not a promise)', raw);
    },
    skipped(req) {
      if (skip === undefined) return false;
      const v = skip(req) as unknown;
      if (v === true || v === false) return v;
      throw wrongResult(`${path}.skip`, 'true or false (not a promise)', v);
    },
  };
}

/**
 * The tenants' fair shares: each tenant's requests in flight, and the tenants active within
 * the window (an arrival or a finished request), at most `maxTenants` of them remembered.
 */
class TenantShares {
  /** In-flight count per tenant; entries at 0 are removed. */
  readonly #inFlight = new Map<string, number>();
  /** Last activity per tenant, oldest first (re-inserted on every one). */
  readonly #lastSeen = new Map<string, number>();
  readonly #windowMs: number;
  readonly #maxTenants: number;

  constructor(windowMs: number, maxTenants: number) {
    this.#windowMs = windowMs;
    this.#maxTenants = maxTenants;
  }

  /** Marks an arrival of `tenant` at `now`; whether one more of its requests puts it over its share of `capacity`. */
  arrive(tenant: string, now: number, capacity: number): boolean {
    const active = this.#active(now, tenant);
    this.#seen(tenant, now);
    return (this.#inFlight.get(tenant) ?? 0) + 1 > capacity / active;
  }

  admitted(tenant: string): void {
    this.#inFlight.set(tenant, (this.#inFlight.get(tenant) ?? 0) + 1);
  }

  released(tenant: string, now: number): void {
    const n = (this.#inFlight.get(tenant) ?? 1) - 1;
    if (n > 0) this.#inFlight.set(tenant, n);
    else this.#inFlight.delete(tenant);
    this.#seen(tenant, now);
  }

  /** The active tenants at `now`, `tenant` among them. */
  #active(now: number, tenant: string): number {
    // Forget tenants idle for longer than the window (oldest first), keeping the bound.
    for (const [t, at] of this.#lastSeen) {
      if (at > now - this.#windowMs && this.#lastSeen.size <= this.#maxTenants) break;
      this.#lastSeen.delete(t);
    }
    return this.#lastSeen.size + (this.#lastSeen.has(tenant) ? 0 : 1);
  }

  #seen(tenant: string, now: number): void {
    this.#lastSeen.delete(tenant);
    this.#lastSeen.set(tenant, now);
  }
}

/**
 * Creates a shedder.
 * @example
 * const shedder = createShedder({ maxInFlight: 200, maxEventLoopDelay: '100ms', tenant: (req) => req.headers['x-tenant'] });
 * const o = shedder.check(req);
 * if (o?.shed) return reply503(o.retryAfterMs);
 */
export function createShedder<R = unknown>(options: ShedOptions<R>): Shedder<R> {
  const s = shedSettings(options, 'shed');
  const { maxInFlight, maxLag, loop, headroom, clock, retryAfterMs } = s;
  const { priorityOf, tenantOf, skipped } = s.readers;
  const shares = new TenantShares(s.tenantWindowMs, s.maxTenants);
  let inFlight = 0;

  const countPressure = () => (maxInFlight === undefined ? 0 : inFlight / maxInFlight);
  const lagPressure = () => (maxLag !== undefined && loop !== undefined ? loop.delayMs() / maxLag : 0);

  /** The admission of a request (of `tenant`, when it has one): counted until released, once. */
  function admit(pressure: number, tenant: string | undefined): ShedOutcome {
    inFlight++;
    publishInFlight('shed', 'shed', inFlight, maxInFlight);
    if (tenant !== undefined) shares.admitted(tenant);
    let released = false;
    return {
      shed: false,
      pressure,
      release() {
        if (released) return;
        released = true;
        inFlight--;
        publishInFlight('shed', 'shed', inFlight, maxInFlight);
        if (tenant !== undefined) shares.released(tenant, clock.now());
      },
    };
  }

  return {
    get inFlight() {
      return inFlight;
    },
    pressure: () => Math.max(countPressure(), lagPressure()),
    check(req) {
      if (skipped(req)) return undefined;
      let threshold = 1 - headroom * (1 - priorityOf(req));
      const tenant = tenantOf(req);
      // Over its fair share: two bands lower (see the module comment).
      if (tenant !== undefined && shares.arrive(tenant, clock.now(), maxInFlight ?? inFlight + 1)) threshold -= 2 * headroom;
      const byCount = countPressure();
      const byLag = lagPressure();
      const pressure = Math.max(byCount, byLag);
      if (pressure >= threshold) {
        return { shed: true, pressure, reason: byCount >= byLag ? 'in-flight' : 'event-loop-delay', retryAfterMs };
      }
      return admit(pressure, tenant);
    },
    close() {
      if (s.ownMonitor) loop?.close();
    },
  };
}

/** The 503 response of a shed request (problem type `#temporary-reduced-capacity`). */
export function shedRefusal(outcome: ShedOutcome & { shed: true }): Refusal {
  return capacityRefusal(
    outcome.retryAfterMs,
    outcome.reason === 'in-flight'
      ? 'The server has too many requests in progress; try again shortly.'
      : 'The server is overloaded; try again shortly.',
  );
}

/** A shed outcome as a `Decision` (for diagnostics): one rule named `shed`. */
export function shedDecision(outcome: ShedOutcome & { shed: true }, at = Date.now()): Decision {
  const rule: RuleResult = {
    name: 'shed',
    allowed: false,
    limit: 1,
    remaining: 0,
    windowMs: 0,
    resetMs: outcome.retryAfterMs,
    retryAfterMs: outcome.retryAfterMs,
    delayMs: 0,
  };
  return controlDecision([rule], false, outcome.retryAfterMs, 0, at);
}

function guarded<F extends (...args: never[]) => unknown>(fn: F | undefined): F | undefined {
  return fn === undefined ? undefined : (guardAppFn(fn) as F);
}

/**
 * A shedding callback's wrong result, coded. Shedding decides at once, so a promise is a
 * wrong value too: it is never awaited, and its rejection is caught here rather than left
 * unhandled.
 */
function wrongResult(path: string, expected: string, v: unknown): Error {
  if (typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function') {
    Promise.resolve(v).catch(() => {});
  }
  return callbackResultError(path, expected, v, 'Return the value itself: shedding decides before anything is awaited.');
}
