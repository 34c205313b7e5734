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
  const counter = (name: string, description: string, unit: string) => meter.createCounter(name, { description, unit });
  const gauge = (name: string, description: string, unit: string) => meter.createObservableGauge(name, { description, unit });
  return {
    requests: counter(
      METRIC_NAMES.requests,
      'Requests decided by a tollgate limiter or control, by the request outcome (admitted, delayed, refused, dry_run_refused).',
      '{request}',
    ),
    decisions: counter(
      METRIC_NAMES.decisions,
      "Each applied policy's own verdict on a request (admitted, delayed, refused, dry_run_refused).",
      '{decision}',
    ),
    degraded: counter(
      METRIC_NAMES.degraded,
      "Decisions the store's failure policy made instead of the store (cause: allow, deny, local).",
      '{decision}',
    ),
    storeErrors: counter(
      METRIC_NAMES.storeErrors,
      'Store calls that failed and what the limiter did with the request (action), by error type.',
      '{error}',
    ),
    redisErrors: counter(
      METRIC_NAMES.redisErrors,
      'Redis calls of a RedisStore that failed or timed out, by operation, fallback and error type.',
      '{error}',
    ),
    duration: meter.createHistogram(METRIC_NAMES.duration, {
      description: "Time a limiter took to decide a request: keys, costs and the store's round trip.",
      unit: 's',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
    breakerState: gauge(
      METRIC_NAMES.breakerState,
      "A RedisStore breaker's state: 1 for the state it is in (closed, half-open, open), 0 for the others.",
      '1',
    ),
    concurrencySlots: gauge(METRIC_NAMES.concurrencySlots, 'Requests holding a slot of a concurrency limit in this process.', '{request}'),
    shedInFlight: gauge(METRIC_NAMES.shedInFlight, 'Requests in flight as a load shedder counts them in this process.', '{request}'),
  };
}
