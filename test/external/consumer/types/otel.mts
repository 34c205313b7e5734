import { metrics as otel } from '@opentelemetry/api';
import { type TollgateMetrics, tollgateMetrics } from '@tollgate/otel';

const recorder: TollgateMetrics = tollgateMetrics({
  meterProvider: otel.getMeterProvider(),
  key: { name: 'tenant', get: (req) => (req as { headers?: Record<string, string> }).headers?.['x-tenant'], limit: 50 },
});
recorder.stop();
