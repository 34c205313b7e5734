// An Express API limited by tollgate whose decisions become OpenTelemetry metrics
// (@tollgate/otel), read by the SDK's Prometheus exporter and served on GET /metrics in
// Prometheus text format, on the same port as the API.
//
// Limits: 5 requests per 10 s per API key (the `x-api-key` header, else the client
// address), 20 per 10 s per tenant (`x-tenant`), and a dry-run global limit of 30 per 10 s
// that only says what it would refuse. Tenants are a label on the metrics, bounded to 20
// distinct values (the rest are "other"); the API key never is one. In front of them, a
// load shedder (200 in flight) and a concurrency limit (50 at once), whose in-flight
// counts are gauges.
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { concurrency, constant, header, ip, rateLimit, shed, tenant } from '@tollgate/express';
import { tollgateMetrics } from '@tollgate/otel';
import express from 'express';

/**
 * Builds the app, its meter provider and the recorder.
 * @returns {{ app: import('express').Express, close: () => Promise<void> }}
 */
export function createMetricsApp() {
  // The exporter is a metric reader that answers scrapes; no server of its own.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ readers: [exporter] });
  const recorder = tollgateMetrics({
    meterProvider,
    key: { name: 'tenant', get: (req) => req.get('x-tenant'), limit: 20 },
  });

  const byKey = header('x-api-key');
  const client = ip();
  const app = express();
  app.get('/metrics', (req, res) => exporter.getMetricsRequestHandler(req, res));
  // A shedder and a concurrency limit in front, so their in-flight gauges show too.
  app.use('/api', shed({ maxInFlight: 200 }), concurrency({ name: 'workers', global: 50 }));
  app.use(
    '/api',
    rateLimit({
      name: 'api',
      rules: [
        { name: 'per-key', key: (req) => byKey(req) ?? client(req), limit: 5, window: '10s' },
        { name: 'per-tenant', key: tenant((req) => req.get('x-tenant')), limit: 20, window: '10s' },
        { name: 'global', key: constant('all'), limit: 30, window: '10s', dryRun: true },
      ],
    }),
  );
  app.get('/api/items', (_req, res) => res.json({ items: [1, 2, 3] }));

  return {
    app,
    async close() {
      recorder.stop();
      await meterProvider.shutdown();
    },
  };
}

/**
 * Starts the example on `host:port` (0: a free port).
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function startMetricsApp({ port = 4200, host = '127.0.0.1' } = {}) {
  const { app, close } = createMetricsApp();
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  });
  return {
    url: `http://${host}:${server.address().port}/`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve()));
      await close();
    },
  };
}

/**
 * The scripted burst: `n` requests for each tenant, each with its own API key per
 * tenant, sent one after another. Returns the status codes by tenant.
 */
export async function burst(url, tenants = { acme: 8, globex: 3 }) {
  const statuses = {};
  for (const [t, n] of Object.entries(tenants)) {
    statuses[t] = [];
    for (let i = 0; i < n; i++) {
      const res = await fetch(new URL('api/items', url), { headers: { 'x-tenant': t, 'x-api-key': `key-${t}` } });
      await res.arrayBuffer();
      statuses[t].push(res.status);
    }
  }
  return statuses;
}
