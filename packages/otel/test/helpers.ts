/**
 * An OpenTelemetry SDK meter provider with the SDK's in-memory exporter, read on demand,
 * and small lookups over what it collected.
 */
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';

export interface Collected {
  /** The value of the point of `name` whose attributes include `attrs`; 0 when there is none. */
  value(name: string, attrs?: Record<string, string>): number;
  /** Every point of `name`. */
  points(name: string): DataPoint<unknown>[];
  names(): string[];
}

export interface TestMeter {
  meterProvider: MeterProvider;
  collect(): Promise<Collected>;
  shutdown(): Promise<void>;
}

export function testMeter(): TestMeter {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    async collect() {
      exporter.reset();
      await reader.forceFlush();
      const all = exporter.getMetrics().flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics));
      const points = (name: string) => all.filter((m) => m.descriptor.name === name).flatMap((m) => m.dataPoints as DataPoint<unknown>[]);
      const matches = (p: DataPoint<unknown>, attrs: Record<string, string>) =>
        Object.entries(attrs).every(([k, v]) => p.attributes[k] === v);
      return {
        points,
        names: () => [...new Set(all.map((m) => m.descriptor.name))].sort(),
        value(name, attrs = {}) {
          let sum = 0;
          for (const p of points(name)) {
            if (!matches(p, attrs)) continue;
            sum += typeof p.value === 'number' ? p.value : (p.value as Histogram).count;
          }
          return sum;
        },
      };
    },
    shutdown: () => meterProvider.shutdown(),
  };
}
