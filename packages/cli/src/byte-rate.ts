/**
 * `tollgate rate-timeline`: a byte-rate limit (`limitRate`) on a simulated link. The real
 * @tollgate/core byte bucket (memory store, manual clock) feeds a sender that could push
 * `link` bytes per second, in steps of `stepMs`; the result is the cumulative bytes and
 * the throughput over time, drawn as an SVG chart: with a full bucket the client gets
 * the link's speed for `burst / (link - rate)`, then `rate`.
 */
import { type ByteGrant, createByteRate, ManualClock, ManualTimers, parseByteRate, parseSize } from '@tollgate/core';
import { COLORS } from './svg.js';

export interface ByteRateRunOptions {
  rate: string | number;
  burst?: string | number;
  /** The link's speed (bytes per second, or `'10MB/s'`). */
  link: string | number;
  after?: string | number;
  durationMs: number;
  /** @default 10 */
  stepMs?: number;
}

export interface ByteRateRun {
  rate: number;
  burst: number;
  link: number;
  after: number;
  durationMs: number;
  stepMs: number;
  /** Cumulative bytes at the end of each step, from `[0, 0]`. */
  samples: Array<[number, number]>;
  /** How long the sender ran at link speed: the first step that sent less than the link allows (ms). */
  fullSpeedMs: number;
  /** `burst / (link - rate)` plus what `after` adds, in ms (Infinity when the link is no faster than the rate). */
  predictedFullSpeedMs: number;
}

/**
 * Runs a byte-rate limit on a simulated link.
 * @example const run = await simulateByteRate({ rate: '2MB/s', burst: '16MB', link: '10MB/s', durationMs: 6000 })
 */
export async function simulateByteRate(o: ByteRateRunOptions): Promise<ByteRateRun> {
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const limit = createByteRate<unknown>({
    rate: o.rate as number,
    ...(o.burst !== undefined ? { burst: o.burst as number } : {}),
    key: () => 'client',
    clock,
    timers,
  });
  const link = parseByteRate(o.link, 'link');
  const after = o.after === undefined ? 0 : parseSize(o.after, 'after', 0);
  const stepMs = o.stepMs ?? 10;
  const g = (await limit.open({})) as ByteGrant;
  let credit = after;
  let pending = false;
  let sent = 0;
  let fullSpeedMs = -1;
  const samples: Array<[number, number]> = [[0, 0]];
  for (let t = stepMs; t <= o.durationMs; t += stepMs) {
    const capacity = (link * stepMs) / 1000;
    let cap = capacity;
    for (;;) {
      const s = Math.min(credit, cap);
      sent += s;
      credit -= s;
      cap -= s;
      if (cap <= 0 || pending) break;
      pending = true;
      g.take(Math.ceil(cap), (n) => {
        pending = false;
        credit += n;
      });
      if (pending) break;
    }
    if (fullSpeedMs < 0 && cap > capacity * 0.01) fullSpeedMs = t - stepMs;
    // A step's send is at its end: the timers (store waits) due within it run first.
    await timers.advance(stepMs, 0);
    samples.push([t, sent]);
  }
  g.close();
  await limit.close();
  const predicted = link > limit.rate ? ((limit.burst + after) / (link - limit.rate)) * 1000 : Number.POSITIVE_INFINITY;
  return {
    rate: limit.rate,
    burst: limit.burst,
    link,
    after,
    durationMs: o.durationMs,
    stepMs,
    samples,
    fullSpeedMs: fullSpeedMs < 0 ? o.durationMs : fullSpeedMs,
    predictedFullSpeedMs: predicted,
  };
}

/** Throughput per `binMs` (bytes per second), from the cumulative samples. */
export function throughput(run: ByteRateRun, binMs = 100): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const per = Math.max(1, Math.round(binMs / run.stepMs));
  for (let i = per; i < run.samples.length; i += per) {
    const [t1, b1] = run.samples[i] as [number, number];
    const [t0, b0] = run.samples[i - per] as [number, number];
    out.push([t1, ((b1 - b0) / (t1 - t0)) * 1000]);
  }
  return out;
}

const mb = (bytes: number) => `${Number((bytes / 1e6).toFixed(2))} MB`;

/** Lines of text: the figures and the throughput every `everyMs`. */
export function byteRateTable(run: ByteRateRun, everyMs = 500): string {
  const lines = [
    `rate ${mb(run.rate)}/s, burst ${mb(run.burst)}, link ${mb(run.link)}/s${run.after > 0 ? `, after ${mb(run.after)}` : ''}`,
    `full link speed for ${(run.fullSpeedMs / 1000).toFixed(2)} s (burst / (link - rate) = ${Number.isFinite(run.predictedFullSpeedMs) ? (run.predictedFullSpeedMs / 1000).toFixed(2) : 'always'} s), then ${mb(run.rate)}/s`,
    '',
    '  time      total       rate',
  ];
  const bins = throughput(run, everyMs);
  for (const [t, bps] of bins) {
    const total = (run.samples.find(([s]) => s === t) as [number, number])[1];
    lines.push(`${`${(t / 1000).toFixed(1)} s`.padStart(6)}  ${mb(total).padStart(10)}  ${`${mb(bps)}/s`.padStart(11)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Two stacked charts on one time axis: throughput (MB/s) and cumulative bytes (MB). */
export function byteRateSvg(run: ByteRateRun, title = 'limitRate on a simulated link'): string {
  const W = 960;
  const L = 72;
  const R = 24;
  const PW = W - L - R;
  const PH = 180;
  const n2 = (x: number) => Number(x.toFixed(2));
  const x = (t: number) => n2(L + (t / run.durationMs) * PW);
  const rates = throughput(run, 100);
  const maxRate = Math.max(run.link, ...rates.map(([, r]) => r)) * 1.1;
  const total = (run.samples[run.samples.length - 1] as [number, number])[1];
  const maxTotal = Math.max(total, 1) * 1.05;
  const out: string[] = [];
  const panel = (
    top: number,
    label: string,
    points: Array<[number, number]>,
    max: number,
    unit: string,
    guides: Array<[number, string]>,
  ) => {
    out.push(`<text x="${L}" y="${top - 8}" class="pt">${label}</text>`);
    out.push(`<rect x="${L}" y="${top}" width="${PW}" height="${PH}" class="frame"/>`);
    const y = (v: number) => n2(top + PH - (v / max) * PH);
    for (let s = 0; s <= run.durationMs; s += 1000) {
      out.push(`<line class="grid" x1="${x(s)}" y1="${top}" x2="${x(s)}" y2="${top + PH}"/>`);
      out.push(`<text class="tick" x="${x(s)}" y="${top + PH + 14}" text-anchor="middle">${s / 1000} s</text>`);
    }
    for (const [v, text] of guides) {
      out.push(`<line class="guide" x1="${L}" y1="${y(v)}" x2="${L + PW}" y2="${y(v)}"/>`);
      out.push(`<text class="tick" x="${L - 4}" y="${n2(y(v) + 4)}" text-anchor="end">${text}</text>`);
    }
    out.push(`<text class="tick" x="${L - 4}" y="${top + 10}" text-anchor="end">${unit}</text>`);
    const d = points.map(([t, v], i) => `${i === 0 ? 'M' : 'L'}${x(t)},${y(v)}`).join(' ');
    out.push(`<path class="line" d="${d}"/>`);
  };
  const switchX = x(run.fullSpeedMs);
  panel(60, 'throughput (per 100 ms)', [[0, rates[0]?.[1] ?? 0], ...rates], maxRate, 'MB/s', [
    [run.link, `${mb(run.link).replace(' MB', '')}`],
    [run.rate, `${mb(run.rate).replace(' MB', '')}`],
  ]);
  panel(60 + PH + 60, 'bytes received', run.samples, maxTotal, 'MB', [
    [run.burst, mb(run.burst).replace(' MB', '')],
    [total, mb(total).replace(' MB', '')],
  ]);
  out.push(`<line class="switch" x1="${switchX}" y1="60" x2="${switchX}" y2="${60 + 2 * PH + 60}"/>`);
  out.push(
    `<text class="bl" x="${n2(switchX + 4)}" y="74">bucket empty after ${(run.fullSpeedMs / 1000).toFixed(2)} s: then ${mb(run.rate)}/s</text>`,
  );
  const height = 60 + 2 * PH + 60 + 30;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" role="img" aria-label="${title}">
<style>
text{font:12px system-ui,sans-serif;fill:#222}.pt{font-weight:600}.tick{font-size:11px;fill:#555}.bl{font-size:11px;fill:${COLORS.band}}
.frame{fill:none;stroke:#999}.grid{stroke:${COLORS.grid}}.guide{stroke:#bbb;stroke-dasharray:4 3}
.line{fill:none;stroke:${COLORS.admitted};stroke-width:2}.switch{stroke:${COLORS.band};stroke-dasharray:6 4}
</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="${L}" y="24" class="pt" style="font-size:15px">${title}</text>
<text x="${L}" y="42" class="tick">rate ${mb(run.rate)}/s, burst ${mb(run.burst)}, link ${mb(run.link)}/s${run.after > 0 ? `, after ${mb(run.after)}` : ''}</text>
${out.join('\n')}
</svg>
`;
}
