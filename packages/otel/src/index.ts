/**
 * @tollgate/otel — OpenTelemetry metrics for tollgate, recorded from its diagnostics
 * channels through `@opentelemetry/api` (a peer dependency; bring your own SDK).
 *
 * @module @tollgate/otel
 */
export { DURATION_BUCKETS, METRIC_NAMES } from './instruments.js';
export {
  errorType,
  type KeyAttribute,
  type Outcome,
  RECORD_FAILED_WARNING,
  REDIS_CHANNELS,
  type TollgateMetrics,
  type TollgateMetricsOptions,
  tollgateMetrics,
} from './metrics.js';
