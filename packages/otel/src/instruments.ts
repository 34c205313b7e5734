/**
 * The instruments `@tollgate/otel` records, created once on a meter. Names follow the
 * OpenTelemetry naming guidelines (dotted, lower case; units in UCUM, durations in
 * seconds); a Prometheus exporter writes them with underscores, counters with `_total`
 * and the histogram with its unit (`tollgate_decision_duration_seconds`).
 */
import type { Counter, Histogram, Meter, ObservableGauge } from '@opentelemetry/api';

/** The metric names, for dashboards and tests. Stable: renaming one breaks users' queries. */
export const METRIC_NAMES = {
  requests: 'tollgate.requests',
  decisions: 'tollgate.decisions',
  degraded: 'tollgate.degraded',
  storeErrors: 'tollgate.store.errors',
  redisErrors: 'tollgate.redis.errors',
  breakerState: 'tollgate.breaker.state',
  duration: 'tollgate.decision.duration',
  concurrencySlots: 'tollgate.concurrency.slots',
  shedInFlight: 'tollgate.shed.in_flight',
} as const;

/** Bucket bounds of the decision latency, in seconds: 25 µs (memory store) up to 2.5 s (a Redis deadline). */
export const DURATION_BUCKETS = [
  0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
];

export interface Instruments {
  requests: Counter;
  decisions: Counter;
  degraded: Counter;
  storeErrors: Counter;
  redisErrors: Counter;
  duration: Histogram;
  breakerState: ObservableGauge;
  concurrencySlots: ObservableGauge;
  shedInFlight: ObservableGauge;
}

export function createInstruments(meter: Meter): Instruments {
  return {
    requests: meter.createCounter(METRIC_NAMES.requests, {
      description:
        'Requests decided by a tollgate limiter or control, by the request outcome (admitted, delayed, refused, dry_run_refused).',
      unit: '{request}',
    }),
    decisions: meter.createCounter(METRIC_NAMES.decisions, {
      description: "Each applied policy's own verdict on a request (admitted, delayed, refused, dry_run_refused).",
      unit: '{decision}',
    }),
    degraded: meter.createCounter(METRIC_NAMES.degraded, {
      description: "Decisions the store's failure policy made instead of the store (cause: allow, deny, local).",
      unit: '{decision}',
    }),
    storeErrors: meter.createCounter(METRIC_NAMES.storeErrors, {
      description: 'Store calls that failed and what the limiter did with the request (action), by error type.',
      unit: '{error}',
    }),
    redisErrors: meter.createCounter(METRIC_NAMES.redisErrors, {
      description: 'Redis calls of a RedisStore that failed or timed out, by operation, fallback and error type.',
      unit: '{error}',
    }),
    duration: meter.createHistogram(METRIC_NAMES.duration, {
      description: "Time a limiter took to decide a request: keys, costs and the store's round trip.",
      unit: 's',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
    breakerState: meter.createObservableGauge(METRIC_NAMES.breakerState, {
      description: "A RedisStore breaker's state: 1 for the state it is in (closed, half-open, open), 0 for the others.",
      unit: '1',
    }),
    concurrencySlots: meter.createObservableGauge(METRIC_NAMES.concurrencySlots, {
      description: 'Requests holding a slot of a concurrency limit in this process.',
      unit: '{request}',
    }),
    shedInFlight: meter.createObservableGauge(METRIC_NAMES.shedInFlight, {
      description: 'Requests in flight as a load shedder counts them in this process.',
      unit: '{request}',
    }),
  };
}
