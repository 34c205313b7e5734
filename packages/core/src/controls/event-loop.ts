/**
 * Event-loop delay, as load shedding reads it.
 *
 * `perf_hooks.monitorEventLoopDelay` samples how late a `resolution`-ms timer fires.
 * Every `interval` the monitor keeps the 99th percentile of the lateness seen since the
 * previous reading (minus the resolution itself) and starts a fresh histogram, so the
 * figure follows the recent past rather than the whole life of the process. Its timer is
 * unref'd and `close()` stops everything.
 */
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';

/** A source of the current event-loop delay in ms (tests pass a function of their own). */
export interface LoopDelaySource {
  delayMs(): number;
  close(): void;
}

/**
 * Starts a monitor.
 * @param options.resolution sampling timer in ms @default 10
 * @param options.interval how often the reading is refreshed, in ms @default 500
 */
export function monitorLoopDelay(options: { resolution?: number; interval?: number } = {}): LoopDelaySource {
  const resolution = options.resolution ?? 10;
  const interval = options.interval ?? 500;
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution });
  histogram.enable();
  let current = 0;
  const timer = setInterval(() => {
    current = histogram.count > 0 ? Math.max(0, histogram.percentile(99) / 1e6 - resolution) : 0;
    histogram.reset();
  }, interval);
  timer.unref();
  let closed = false;
  return {
    delayMs: () => current,
    close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      histogram.disable();
    },
  };
}
