/**
 * `tollgateMetrics()`: turns tollgate's `node:diagnostics_channel` messages into
 * OpenTelemetry metrics through `@opentelemetry/api`. It subscribes to the channels
 * (`tollgate:decision`, `tollgate:store-error`, `tollgate:in-flight`, and the Redis
 * store's `tollgate:redis:error` and `tollgate:redis:breaker`), never to an adapter's
 * internals, so any adapter that publishes them is covered.
 *
 * Attributes are the limiter's and the policies' names from the app's configuration,
 * outcomes and causes from small fixed sets: nothing a client chooses. A client key (or
 * a tenant) is recorded only when asked for (`key`), and then with a bound on how many
 * distinct values get their own series.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { type Attributes, type Meter, type MeterProvider, metrics, type ObservableResult } from '@opentelemetry/api';
import {
  CHANNEL_NAMES,
  configError,
  type Decision,
  type DecisionMessage,
  describeValue,
  type InFlightMessage,
  type StoreErrorMessage,
  unknownOptionFix,
} from '@tollgate/core';
import { createInstruments, type Instruments } from './instruments.js';

/** The Redis store's channel names (`REDIS_CHANNEL_NAMES` of `@tollgate/redis`; a test keeps them equal). */
export const REDIS_CHANNELS = { error: 'tollgate:redis:error', breaker: 'tollgate:redis:breaker' } as const;

/** What a request, or one policy, did with it. */
export type Outcome = 'admitted' | 'delayed' | 'refused' | 'dry_run_refused';

/** Records a bounded label of your choosing (a tenant, a plan, a client key) on the decision metrics. */
export interface KeyAttribute {
  /**
   * The value for a request (the framework's request object, as the limiter's key
   * functions receive it, typed `unknown` since any adapter may have decided);
   * `undefined` or `null` records no such attribute.
   * @example (req) => (req as express.Request).user?.org
   */
  get: (request: unknown, decision: Decision) => string | undefined | null;
  /** The attribute's name. @default 'tollgate.key' */
  name?: string;
  /**
   * At most this many distinct values get their own series; the rest are recorded as
   * `other`, so a flood of client-chosen values cannot grow the metrics without bound.
   * @default 100
   */
  limit?: number;
}

export interface TollgateMetricsOptions {
  /** Where the instruments are created. @default the global meter provider (`metrics.getMeterProvider()`) */
  meterProvider?: MeterProvider;
  /**
   * Adds a label to `tollgate.requests` and `tollgate.decisions`. Off by default: a raw
   * client key is unbounded (every IP is a series) and personal data.
   * @example { name: 'tenant', get: (req) => (req as express.Request).user?.org, limit: 50 }
   */
  key?: KeyAttribute;
}

export interface TollgateMetrics {
  /** Stops recording (unsubscribes from every channel). Idempotent. */
  stop(): void;
  /**
   * Recordings that failed (an instrument, view or label function that threw or rejected).
   * A failure never reaches a request: the decision goes on unrecorded, and the first
   * failure is reported once as a process warning (`TOLLGATE_OTEL_RECORD_FAILED`).
   */
  readonly failures: number;
}

/** The process warning's code for a recording that failed (docs/errors.md, "Process warnings"). */
export const RECORD_FAILED_WARNING = 'TOLLGATE_OTEL_RECORD_FAILED';

const OUTCOMES: readonly Outcome[] = ['admitted', 'delayed', 'refused', 'dry_run_refused'];
const BREAKER_STATES = ['closed', 'half-open', 'open'] as const;
/** The attributes the decision metrics carry already: a label of the app's may not take their place. */
const RESERVED = ['tollgate.limiter', 'tollgate.policy', 'tollgate.outcome'];
/** The longest error type recorded; anything longer is cut. */
const ERROR_TYPE_MAX = 64;

/** Attribute objects per limiter (and policy), built once: the SDK and the no-op both take them as they are. */
type ByOutcome = Record<Outcome, Attributes>;

function byOutcome(base: Attributes): ByOutcome {
  const o = {} as ByOutcome;
  for (const outcome of OUTCOMES) o[outcome] = { ...base, 'tollgate.outcome': outcome };
  return o;
}

/** A bounded name for an error: its `code` (TollgateError, Node's system errors), else its class name. */
export function errorType(error: unknown): string {
  let t: unknown;
  if (typeof error === 'object' && error !== null) {
    try {
      const code = (error as { code?: unknown }).code;
      t = typeof code === 'string' && code !== '' ? code : (error as { name?: unknown }).name;
    } catch {
      // A getter that throws (a proxy, say) leaves the generic type.
    }
  }
  if (typeof t !== 'string' || t === '') return typeof error === 'object' && error !== null ? 'Error' : typeof error;
  return t.replace(/[^A-Za-z0-9_.:-]/g, '_').slice(0, ERROR_TYPE_MAX);
}

function requestOutcome(d: Decision, limiterDryRun: boolean): Outcome {
  if (!d.allowed) return limiterDryRun ? 'dry_run_refused' : 'refused';
  if (d.dryRunRejectedBy.length > 0) return 'dry_run_refused';
  return d.delayMs > 0 && !limiterDryRun ? 'delayed' : 'admitted';
}

function checkOptions(options: unknown): TollgateMetricsOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) {
    throw configError('TG_INVALID_OPTION', {
      path: 'tollgateMetrics',
      expected: 'an options object or nothing',
      received: describeValue(options),
      fix: 'Call tollgateMetrics() or tollgateMetrics({ meterProvider }).',
    });
  }
  const o = options as Record<string, unknown>;
  for (const name of Object.keys(o)) {
    if (name !== 'meterProvider' && name !== 'key') {
      throw configError('TG_UNKNOWN_OPTION', {
        path: `tollgateMetrics.${name}`,
        expected: 'meterProvider or key',
        received: JSON.stringify(name),
        fix: unknownOptionFix(name, ['meterProvider', 'key'], 'Remove the option or correct its spelling.'),
      });
    }
  }
  const mp = o.meterProvider;
  if (mp !== undefined && (typeof mp !== 'object' || mp === null || typeof (mp as MeterProvider).getMeter !== 'function')) {
    throw configError('TG_INVALID_OPTION', {
      path: 'tollgateMetrics.meterProvider',
      expected: 'a MeterProvider (an object with getMeter())',
      received: describeValue(mp),
      fix: "Pass the SDK's MeterProvider, or leave it out to use the global one.",
    });
  }
  const key = o.key;
  if (key !== undefined) {
    const k = key as Partial<KeyAttribute>;
    if (typeof key !== 'object' || key === null || typeof k.get !== 'function') {
      throw configError('TG_INVALID_OPTION', {
        path: 'tollgateMetrics.key',
        expected: '{ get: (request, decision) => string | undefined, name?, limit? }',
        received: describeValue(key),
        fix: 'Pass e.g. { name: "tenant", get: (req) => req.user?.org }, or leave it out.',
      });
    }
    if (
      k.name !== undefined &&
      (typeof k.name !== 'string' || !/^[A-Za-z][A-Za-z0-9_.]{0,62}$/.test(k.name) || RESERVED.includes(k.name))
    ) {
      throw configError('TG_INVALID_OPTION', {
        path: 'tollgateMetrics.key.name',
        expected: `an attribute name: a letter, then up to 62 letters, digits, "_" or ".", other than ${RESERVED.join(', ')}`,
        received: describeValue(k.name),
        fix: 'Use a name such as "tenant".',
      });
    }
    if (k.limit !== undefined && (typeof k.limit !== 'number' || !Number.isInteger(k.limit) || k.limit < 1 || k.limit > 10_000)) {
      throw configError('TG_INVALID_OPTION', {
        path: 'tollgateMetrics.key.limit',
        expected: 'a whole number from 1 to 10000',
        received: describeValue(k.limit),
        fix: 'Pass the number of distinct values worth a series each, e.g. 100.',
      });
    }
  }
  return o as TollgateMetricsOptions;
}

/**
 * Subscribes to tollgate's diagnostics channels and records them as OpenTelemetry
 * metrics. Call it once, after the SDK's meter provider is registered (or pass it).
 * With no meter provider installed the instruments are the API's no-ops.
 * @example
 * const meterProvider = new MeterProvider({ readers: [new PrometheusExporter()] });
 * const stop = tollgateMetrics({ meterProvider });
 */
export function tollgateMetrics(options?: TollgateMetricsOptions): TollgateMetrics {
  const o = checkOptions(options);
  const meter: Meter = (o.meterProvider ?? metrics.getMeterProvider()).getMeter('@tollgate/otel', '0.1.0');
  const m: Instruments = createInstruments(meter);
  const key = o.key;
  const keyName = key?.name ?? 'tollgate.key';
  const keyLimit = key?.limit ?? 100;
  const keysSeen = new Set<string>();

  let failures = 0;
  /**
   * A failing observer is counted and reported once, never thrown: a throw in a
   * diagnostics_channel subscriber is an uncaught exception (the process exits), and a
   * rejection nobody handles is one too on Node 20.
   */
  function failed(error: unknown): void {
    failures++;
    if (failures > 1) return;
    process.emitWarning(
      `@tollgate/otel could not record a metric (${errorType(error)}): decisions go on, unrecorded where it fails. ` +
        'Check the meter provider and its views, and the key label function.',
      { type: 'TollgateWarning', code: RECORD_FAILED_WARNING },
    );
  }
  function guarded(fn: (message: unknown) => void): (message: unknown) => void {
    return (message) => {
      try {
        fn(message);
      } catch (error) {
        failed(error);
      }
    };
  }

  const requestAttrs = new Map<string, ByOutcome>();
  const policyAttrs = new Map<string, Map<string, ByOutcome>>();
  const limiterAttrs = new Map<string, Attributes>();

  function limiterAttributes(limiter: string): Attributes {
    let a = limiterAttrs.get(limiter);
    if (a === undefined) {
      a = { 'tollgate.limiter': limiter };
      limiterAttrs.set(limiter, a);
    }
    return a;
  }

  function requestAttributes(limiter: string): ByOutcome {
    let a = requestAttrs.get(limiter);
    if (a === undefined) {
      a = byOutcome(limiterAttributes(limiter));
      requestAttrs.set(limiter, a);
    }
    return a;
  }

  function policyAttributes(limiter: string, policy: string): ByOutcome {
    let byPolicy = policyAttrs.get(limiter);
    if (byPolicy === undefined) {
      byPolicy = new Map();
      policyAttrs.set(limiter, byPolicy);
    }
    let a = byPolicy.get(policy);
    if (a === undefined) {
      a = byOutcome({ 'tollgate.limiter': limiter, 'tollgate.policy': policy });
      byPolicy.set(policy, a);
    }
    return a;
  }

  /** The user's label for this request, bounded: values past the limit become 'other'. */
  function keyOf(msg: DecisionMessage): string | undefined {
    let v: unknown;
    try {
      v = (key as KeyAttribute).get(msg.request, msg.decision);
    } catch (error) {
      // The metric goes without the label.
      failed(error);
      return undefined;
    }
    if (typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function') {
      // Never awaited (the metric is recorded now): a rejection is a failure, not left unhandled.
      Promise.resolve(v).catch(failed);
      return undefined;
    }
    // Anything but a string or a number (undefined, a promise, an object) records no label.
    if (typeof v === 'number') v = String(v);
    if (typeof v !== 'string') return undefined;
    const s = v.slice(0, 128);
    if (keysSeen.has(s)) return s;
    if (keysSeen.size < keyLimit) {
      keysSeen.add(s);
      return s;
    }
    return 'other';
  }

  function withKey(a: Attributes, k: string | undefined): Attributes {
    return k === undefined ? a : { ...a, [keyName]: k };
  }

  function onDecision(message: unknown): void {
    const msg = message as DecisionMessage;
    const d = msg.decision;
    const limiter = msg.limiter;
    const dry = msg.dryRun === true;
    const k = key === undefined ? undefined : keyOf(msg);
    m.requests.add(1, withKey(requestAttributes(limiter)[requestOutcome(d, dry)], k));
    const rules = d.rules;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i] as Decision['rules'][number];
      let outcome: Outcome;
      if (!r.allowed) outcome = r.dryRun || dry ? 'dry_run_refused' : 'refused';
      else outcome = r.delayMs > 0 && d.allowed && !dry && !r.dryRun ? 'delayed' : 'admitted';
      m.decisions.add(1, withKey(policyAttributes(limiter, r.name)[outcome], k));
    }
    if (d.degraded !== undefined) m.degraded.add(1, { 'tollgate.limiter': limiter, 'tollgate.cause': d.degraded });
    if (msg.durationMs !== undefined) m.duration.record(msg.durationMs / 1000, limiterAttributes(limiter));
  }

  function onStoreError(message: unknown): void {
    const msg = message as StoreErrorMessage;
    m.storeErrors.add(1, { 'tollgate.limiter': msg.limiter, 'tollgate.action': msg.action, 'error.type': errorType(msg.error) });
  }

  // Breaker states by store; stores are named by their prefix (numbered when two share one).
  const breakers = new Map<object, { name: string; state: string }>();
  const storeNames = new Set<string>();
  function breakerOf(store: unknown): { name: string; state: string } | undefined {
    if (typeof store !== 'object' || store === null) return undefined;
    let b = breakers.get(store);
    if (b === undefined) {
      const prefix = (store as { prefix?: unknown }).prefix;
      const base = typeof prefix === 'string' && prefix !== '' ? prefix.slice(0, 64) : 'redis';
      let name = base;
      for (let n = 2; storeNames.has(name); n++) name = `${base}#${n}`;
      storeNames.add(name);
      b = { name, state: 'closed' };
      breakers.set(store, b);
    }
    return b;
  }

  function onRedisError(message: unknown): void {
    const msg = message as { store?: unknown; error?: unknown; operation?: unknown; policy?: unknown; breaker?: unknown };
    const b = breakerOf(msg.store);
    if (b !== undefined && typeof msg.breaker === 'string') b.state = msg.breaker;
    m.redisErrors.add(1, {
      'tollgate.store': b?.name ?? 'redis',
      'tollgate.operation': String(msg.operation),
      'tollgate.fallback': String(msg.policy),
      'error.type': errorType(msg.error),
    });
  }

  function onBreaker(message: unknown): void {
    const msg = message as { store?: unknown; to?: unknown };
    const b = breakerOf(msg.store);
    if (b !== undefined && typeof msg.to === 'string') b.state = msg.to;
  }

  const inFlight = { concurrency: new Map<string, number>(), shed: new Map<string, number>() };
  function onInFlight(message: unknown): void {
    const msg = message as InFlightMessage;
    inFlight[msg.control]?.set(msg.limiter, msg.inFlight);
  }

  const observe = {
    breaker(result: ObservableResult) {
      for (const b of breakers.values()) {
        for (const s of BREAKER_STATES) result.observe(b.state === s ? 1 : 0, { 'tollgate.store': b.name, 'tollgate.state': s });
      }
    },
    slots(result: ObservableResult) {
      for (const [limiter, n] of inFlight.concurrency) result.observe(n, limiterAttributes(limiter));
    },
    shed(result: ObservableResult) {
      for (const [limiter, n] of inFlight.shed) result.observe(n, limiterAttributes(limiter));
    },
  };
  m.breakerState.addCallback(observe.breaker);
  m.concurrencySlots.addCallback(observe.slots);
  m.shedInFlight.addCallback(observe.shed);

  const subscriptions: [string, (message: unknown) => void][] = [
    [CHANNEL_NAMES.decision, guarded(onDecision)],
    [CHANNEL_NAMES.storeError, guarded(onStoreError)],
    [CHANNEL_NAMES.inFlight, guarded(onInFlight)],
    [REDIS_CHANNELS.error, guarded(onRedisError)],
    [REDIS_CHANNELS.breaker, guarded(onBreaker)],
  ];
  for (const [name, fn] of subscriptions) diagnosticsChannel.subscribe(name, fn);

  let stopped = false;
  return {
    get failures() {
      return failures;
    },
    stop() {
      if (stopped) return;
      stopped = true;
      for (const [name, fn] of subscriptions) diagnosticsChannel.unsubscribe(name, fn);
      m.breakerState.removeCallback(observe.breaker);
      m.concurrencySlots.removeCallback(observe.slots);
      m.shedInFlight.removeCallback(observe.shed);
    },
  };
}
