// The live view: refusals per policy over time, from the same OpenTelemetry metrics
// `@tollgate/otel` records for an operator (`tollgate.decisions` with outcome `refused`),
// read from an in-process meter provider every SAMPLE_MS while runs are firing, and
// drawn as an SVG in the style of the timelines.
//
// The SDK is loaded on the first run, not at start-up, so the page comes up as fast as before.
import { COLORS } from '@tollgate/cli';

export const SAMPLE_MS = 250;
/** The chart shows this much history. */
export const SPAN_MS = 30_000;
/** Sampling goes on this long after the last run finished, then stops until the next one. */
const LINGER_MS = 3_000;
const PALETTE = [COLORS.rejected, '#6a1b9a', COLORS.band, '#00838f', '#ef6c00', '#4e342e', '#ad1457', '#558b2f'];

const WIDTH = 960;
const HEIGHT = 250;
const LEFT = 64;
const RIGHT = 24;
const TOP = 52;
const PLOT_H = 130;
const PLOT_W = WIDTH - LEFT - RIGHT;

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const n2 = (x) => Number(x.toFixed(2));

/** A round top for the y axis whose quarters are round too: 1, 2, 4 or 8 times a power of ten. */
function niceMax(v) {
  if (v <= 1) return 1;
  const pow = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 4, 8]) if (m * pow >= v) return m * pow;
  return 10 * pow;
}

/**
 * Starts recording (lazily: `start()` loads the SDK). `limiterName` is the name of the
 * limiters whose refusals are shown.
 */
export function createLive(limiterName, now = () => performance.now()) {
  let loaded;
  let timer;
  let activeRuns = 0;
  let lingerUntil = 0;
  /** Cumulative refusals per policy at each sample: { t, counts: Map }. */
  const samples = [];
  const order = [];

  async function load() {
    const [{ MeterProvider, MetricReader }, { tollgateMetrics, METRIC_NAMES }] = await Promise.all([
      import('@opentelemetry/sdk-metrics'),
      import('@tollgate/otel'),
    ]);
    class OnDemandReader extends MetricReader {
      async onForceFlush() {}
      async onShutdown() {}
    }
    const reader = new OnDemandReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const recorder = tollgateMetrics({ meterProvider });
    return { reader, meterProvider, recorder, name: METRIC_NAMES.decisions };
  }

  async function sample() {
    const { reader, name } = await loaded;
    const { resourceMetrics } = await reader.collect();
    const counts = new Map();
    for (const sm of resourceMetrics.scopeMetrics) {
      for (const m of sm.metrics) {
        if (m.descriptor.name !== name) continue;
        for (const p of m.dataPoints) {
          const a = p.attributes;
          if (a['tollgate.limiter'] !== limiterName || a['tollgate.outcome'] !== 'refused') continue;
          const policy = String(a['tollgate.policy']);
          counts.set(policy, (counts.get(policy) ?? 0) + p.value);
          if (!order.includes(policy)) order.push(policy);
        }
      }
    }
    const t = now();
    samples.push({ t, counts });
    while (samples.length > 0 && samples[0].t < t - SPAN_MS - SAMPLE_MS) samples.shift();
    if (activeRuns === 0 && t >= lingerUntil) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  function tick() {
    sample().catch(() => {
      // A failed read leaves a gap in the chart; the next tick tries again.
    });
  }

  return {
    /** A run starts firing: sample until it is over (and a little after). */
    async begin() {
      loaded ??= load();
      await loaded;
      activeRuns++;
      if (timer === undefined) {
        await sample();
        timer = setInterval(tick, SAMPLE_MS);
        timer.unref();
      }
    },
    /** The run is over: one sample now, so its last refusals are on the chart at once. */
    async end() {
      activeRuns = Math.max(0, activeRuns - 1);
      lingerUntil = now() + LINGER_MS;
      if (loaded !== undefined) await sample();
    },
    /** The chart and the totals per policy. */
    view() {
      const t = now();
      const totals = {};
      const last = samples[samples.length - 1];
      for (const policy of order) totals[policy] = last?.counts.get(policy) ?? 0;
      return { totals, svg: draw(samples, order, t) };
    },
    async close() {
      clearInterval(timer);
      timer = undefined;
      if (loaded !== undefined) {
        const { recorder, meterProvider } = await loaded;
        recorder.stop();
        await meterProvider.shutdown();
      }
    },
  };
}

/**
 * Refusals per second per policy over each interval between consecutive samples, as
 * steps, over the last SPAN_MS. A pause in sampling (no run) is a gap, not a slope.
 */
function draw(samples, order, t) {
  const x = (at) => n2(LEFT + ((Math.max(at, t - SPAN_MS) - (t - SPAN_MS)) / SPAN_MS) * PLOT_W);
  const series = order.map((policy) => {
    const steps = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1];
      const b = samples[i];
      if (b.t - a.t > SAMPLE_MS * 3 || b.t <= t - SPAN_MS || b.t === a.t) continue;
      const perSecond = (((b.counts.get(policy) ?? 0) - (a.counts.get(policy) ?? 0)) * 1000) / (b.t - a.t);
      steps.push({ from: a.t, to: b.t, v: perSecond });
    }
    return { policy, steps };
  });
  const top = niceMax(Math.max(1, ...series.flatMap((s) => s.steps.map((p) => p.v))));
  const y = (v) => n2(TOP + PLOT_H - (v / top) * PLOT_H);
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img">`);
  out.push(
    '<style>text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:12px;fill:#222}',
    `.t{font-size:16px;font-weight:600}.n{fill:#555}.grid line{stroke:${COLORS.grid};stroke-width:1}.frame{fill:none;stroke:#bbb}`,
    '.tk{text-anchor:middle;fill:#555;font-size:11px}.yl{text-anchor:end;fill:#777;font-size:10px}.yt{text-anchor:middle;fill:#555;font-size:11px}',
    '.ln{fill:none;stroke-width:2;stroke-linejoin:round}</style>',
  );
  out.push(`<text class="t" x="${LEFT}" y="22">Live: refusals per policy</text>`);
  out.push(
    `<text class="n" x="${LEFT}" y="40">tollgate.decisions{outcome="refused"} from @tollgate/otel, per second, sampled every ${SAMPLE_MS} ms</text>`,
  );
  out.push('<g class="grid">');
  for (let k = 0; k <= 4; k++) out.push(`<line x1="${LEFT}" x2="${LEFT + PLOT_W}" y1="${y((top * k) / 4)}" y2="${y((top * k) / 4)}"/>`);
  out.push('</g>');
  out.push(`<rect class="frame" x="${LEFT}" y="${TOP}" width="${PLOT_W}" height="${PLOT_H}"/>`);
  for (let k = 0; k <= 4; k++)
    out.push(`<text class="yl" x="${LEFT - 6}" y="${y((top * k) / 4) + 3}">${Number(((top * k) / 4).toFixed(2))}</text>`);
  out.push(`<text class="yt" transform="translate(${LEFT - 38} ${TOP + PLOT_H / 2}) rotate(-90)">refusals / s</text>`);
  for (let s = 0; s <= SPAN_MS / 1000; s += 5) {
    out.push(
      `<text class="tk" x="${x(t - SPAN_MS + s * 1000)}" y="${TOP + PLOT_H + 16}">${s === SPAN_MS / 1000 ? 'now' : `−${SPAN_MS / 1000 - s} s`}</text>`,
    );
  }
  series.forEach(({ policy, steps }, k) => {
    const color = PALETTE[k % PALETTE.length];
    const d = steps
      .map((p, j) => `${j > 0 && steps[j - 1].to === p.from ? 'L' : 'M'}${x(p.from)} ${y(p.v)} L${x(p.to)} ${y(p.v)}`)
      .join(' ');
    const total = samples[samples.length - 1]?.counts.get(policy) ?? 0;
    out.push(
      `<path class="ln" data-policy="${esc(policy)}" data-total="${total}" stroke="${color}" d="${d || `M${LEFT} ${y(0)}`}"><title>${esc(policy)}: ${total} refused</title></path>`,
    );
  });
  const ly = TOP + PLOT_H + 40;
  if (order.length === 0)
    out.push(`<text class="n" x="${LEFT}" y="${ly}">No refusals yet: fire a pattern that goes over the limit.</text>`);
  series.forEach(({ policy }, k) => {
    const total = samples[samples.length - 1]?.counts.get(policy) ?? 0;
    const lx = LEFT + (k % 4) * 220;
    const row = ly + Math.floor(k / 4) * 18;
    out.push(
      `<g transform="translate(${lx} ${row})"><line x1="0" x2="14" y1="-4" y2="-4" stroke="${PALETTE[k % PALETTE.length]}" stroke-width="3"/>` +
        `<text x="20" y="0">${esc(policy)}: ${total} refused</text></g>`,
    );
  });
  out.push('</svg>');
  return out.join('');
}
