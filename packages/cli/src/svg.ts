/**
 * SVG timelines: one row per request, in arrival order, on a shared time
 * axis in seconds. An admitted request is a filled dot at its arrival; a delayed one
 * is a hollow dot at its arrival joined to a filled dot at its departure; a rejected
 * one is a cross. The busiest interval (the "max admitted in any W" figure) is a
 * shaded band, so the boundary burst of a fixed window is visible at a glance.
 *
 * Shapes differ as well as colours, so the chart reads in greyscale and for
 * colour-blind readers. Every request carries a tooltip and a `data-decision`
 * attribute (the playground's browser test counts them).
 */
import { type CompiledRule, compileRules, registry } from '@tollgate/core';
import { describePolicy, type Policy } from './policy.js';
import type { SimulationResult } from './simulate.js';
import type { Busiest, RequestRecord } from './stats.js';
import { humanDuration, seconds } from './time.js';

/** One timeline in a figure: `simulate` draws one, `compare` one per policy. */
export interface Panel {
  title: string;
  subtitle: string;
  records: readonly RequestRecord[];
  busiest: Busiest;
  intervalMs: number;
  /** Draw the window boundaries of a clock-aligned fixed window of this length. */
  windowMs?: number | undefined;
}

export const COLORS = { admitted: '#2e7d32', delayed: '#e08a00', rejected: '#c62828', band: '#1565c0', grid: '#e3e3e3' };

/** Most rows drawn per panel; a longer run is cut with a note (the table and JSON keep everything). */
export const MAX_ROWS = 600;

const WIDTH = 960;
const LEFT = 64;
const RIGHT = 24;
const PLOT = WIDTH - LEFT - RIGHT;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const n2 = (x: number) => Number(x.toFixed(2));

/** A tick step of 1, 2 or 5 times a power of ten, giving at most about 12 ticks. */
function tickStep(span: number): number {
  const raw = span / 12;
  const pow = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

function tickLabel(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

/**
 * Renders a figure of one or more timelines sharing the time axis (at least up to `endMs`).
 * @example writeFileSync('out.svg', timelineSvg([panel], { title: 'fixed-window on a boundary attack' }))
 */
export function timelineSvg(panels: readonly Panel[], o: { title: string; note?: string; endMs?: number }): string {
  // o.endMs lets two figures share one time axis (the playground draws the run and the prediction).
  let end = Math.max(1000, o.endMs ?? 0);
  // A loop, not Math.max(...records): a trace can hold millions of requests.
  for (const p of panels) for (const r of p.records) end = Math.max(end, r.departure ?? r.arrival);
  const step = tickStep(end);
  const span = Math.ceil((end * 1.04) / step) * step;
  const x = (t: number) => n2(LEFT + (t / span) * PLOT);
  const out: string[] = [];
  let y = 34 + (o.note ? 16 : 0);

  for (const p of panels) {
    const rows = p.records.slice(0, MAX_ROWS);
    const n = Math.max(rows.length, 1);
    const h = Math.min(14, Math.max(1.6, (panels.length > 1 ? 240 : 420) / n));
    const ph = n2(h * n);
    const r = n2(Math.min(4, Math.max(1.1, h * 0.42)));
    out.push(`<text x="${LEFT}" y="${y + 14}" class="pt">${esc(p.title)}</text>`);
    out.push(`<text x="${LEFT}" y="${y + 30}" class="ps">${esc(p.subtitle)}</text>`);
    const top = y + 40;
    // grid and axis
    out.push(`<g class="grid">`);
    for (let t = 0; t <= span; t += step) out.push(`<line x1="${x(t)}" y1="${top}" x2="${x(t)}" y2="${n2(top + ph)}"/>`);
    out.push('</g>');
    if (p.windowMs !== undefined && span / p.windowMs <= 60) {
      out.push('<g class="wb">');
      for (let t = p.windowMs; t <= span; t += p.windowMs) out.push(`<line x1="${x(t)}" y1="${top}" x2="${x(t)}" y2="${n2(top + ph)}"/>`);
      out.push('</g>');
    }
    if (p.busiest.count > 0) {
      const bx = x(p.busiest.from);
      const bw = n2(Math.min(x(p.busiest.from + p.intervalMs), LEFT + PLOT) - bx);
      out.push(
        `<rect class="band" x="${bx}" y="${top}" width="${bw}" height="${ph}"><title>busiest ${humanDuration(p.intervalMs)}: ${p.busiest.count} admitted from ${seconds(p.busiest.from)} s</title></rect>`,
      );
      // Bottom-left of the band: rows run top-left to bottom-right, so that corner is usually free.
      out.push(
        `<text class="bl" x="${n2(bx + 4)}" y="${n2(top + ph - 5)}">max ${p.busiest.count} in ${humanDuration(p.intervalMs)}</text>`,
      );
    }
    out.push(`<rect class="frame" x="${LEFT}" y="${top}" width="${PLOT}" height="${ph}"/>`);
    // requests
    out.push('<g class="reqs">');
    rows.forEach((q, i) => {
      const cy = n2(top + (i + 0.5) * h);
      const ax = x(q.arrival);
      const tip = `#${q.i + 1} ${esc(q.key)}: arrived ${seconds(q.arrival)} s, ${q.decision}${
        q.decision === 'delayed' ? ` ${q.delayMs} ms, left ${seconds(q.departure as number)} s` : ''
      }${q.rules.length ? ` (${esc(q.rules.join(', '))})` : ''}`;
      let shape: string;
      if (q.decision === 'rejected') {
        shape = `<path class="rj" d="M${n2(ax - r)} ${n2(cy - r)}L${n2(ax + r)} ${n2(cy + r)}M${n2(ax - r)} ${n2(cy + r)}L${n2(ax + r)} ${n2(cy - r)}"/>`;
      } else if (q.decision === 'delayed') {
        const dx = x(q.departure as number);
        shape = `<line class="dl" x1="${ax}" y1="${cy}" x2="${dx}" y2="${cy}"/><circle class="dh" cx="${ax}" cy="${cy}" r="${r}"/><circle class="dd" cx="${dx}" cy="${cy}" r="${r}"/>`;
      } else {
        shape = `<circle class="ad" cx="${ax}" cy="${cy}" r="${r}"/>`;
      }
      out.push(`<g data-decision="${q.decision}"><title>${tip}</title>${shape}</g>`);
    });
    out.push('</g>');
    // y labels and x ticks
    out.push(`<text class="yl" x="${LEFT - 6}" y="${n2(top + Math.min(h, 10))}">#1</text>`);
    if (rows.length > 1) out.push(`<text class="yl" x="${LEFT - 6}" y="${n2(top + ph)}">#${rows.length}</text>`);
    out.push(`<text class="yt" transform="translate(${LEFT - 30} ${n2(top + ph / 2)}) rotate(-90)">requests</text>`);
    const axisY = n2(top + ph + 14);
    out.push('<g class="tk">');
    for (let t = 0; t <= span; t += step) out.push(`<text x="${x(t)}" y="${axisY}">${tickLabel(t)}</text>`);
    out.push('</g>');
    if (p.records.length > rows.length) {
      out.push(`<text class="ps" x="${LEFT}" y="${n2(axisY + 16)}">first ${rows.length} of ${p.records.length} requests drawn</text>`);
      y += 16;
    }
    y = top + ph + 30;
  }

  // legend
  const ly = y + 12;
  const items: string[] = [];
  let lx = LEFT;
  const add = (shape: string, label: string, w: number) => {
    items.push(`<g transform="translate(${lx} ${ly})">${shape}<text x="18" y="4">${label}</text></g>`);
    lx += w;
  };
  add('<circle class="ad" cx="4" cy="0" r="4"/>', 'admitted', 92);
  add(
    '<line class="dl" x1="-2" y1="0" x2="10" y2="0"/><circle class="dh" cx="-2" cy="0" r="3"/><circle class="dd" cx="10" cy="0" r="3"/>',
    'delayed (arrival → departure)',
    214,
  );
  add('<path class="rj" d="M0 -4L8 4M0 4L8 -4"/>', 'rejected', 90);
  add('<rect class="band" x="-1" y="-6" width="10" height="12"/>', 'busiest interval', 130);
  if (panels.some((p) => p.windowMs !== undefined)) add('<line class="wbl" x1="4" y1="-7" x2="4" y2="7"/>', 'window boundary', 130);
  items.push(`<text class="tk" x="${LEFT + PLOT / 2}" y="${ly + 22}">time (seconds of simulated time)</text>`);
  const height = ly + 34;

  const style = [
    'text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:12px;fill:#222}',
    '.t{font-size:16px;font-weight:600}.n{fill:#555}.pt{font-size:13px;font-weight:600}.ps{fill:#555;font-size:11.5px}',
    `.grid line{stroke:${COLORS.grid};stroke-width:1}.wb line,.wbl{stroke:#888;stroke-width:1;stroke-dasharray:4 3}`,
    '.frame{fill:none;stroke:#bbb}',
    `.band{fill:${COLORS.band};fill-opacity:.12;stroke:${COLORS.band};stroke-opacity:.6;stroke-dasharray:3 2}.bl{fill:${COLORS.band};font-size:11px}`,
    `.ad{fill:${COLORS.admitted}}.dd{fill:${COLORS.delayed}}.dh{fill:#fff;stroke:${COLORS.delayed};stroke-width:1.2}`,
    `.dl{stroke:${COLORS.delayed};stroke-width:1.2;stroke-opacity:.7}.rj{stroke:${COLORS.rejected};stroke-width:1.5;fill:none}`,
    '.tk text,.tk{text-anchor:middle;fill:#555;font-size:11px}.yl{text-anchor:end;fill:#777;font-size:10px}.yt{text-anchor:middle;fill:#555;font-size:11px}',
  ].join('');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${n2(height)}" viewBox="0 0 ${WIDTH} ${n2(height)}" role="img" aria-label="${esc(o.title)}">`,
    `<style>${style}</style>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text class="t" x="${LEFT}" y="22">${esc(o.title)}</text>`,
    o.note ? `<text class="n" x="${LEFT}" y="40">${esc(o.note)}</text>` : '',
    ...out,
    ...items,
    '</svg>',
  ]
    .filter((s) => s !== '')
    .join('\n')
    .concat('\n');
}

/**
 * The panel for one policy's run: its description, its figures, and the window
 * boundaries when the first rule is a clock-aligned fixed window.
 */
export function panelOf(policy: Policy, result: SimulationResult): Panel {
  const first = policy.rules.length > 0 ? (compileRules(policy.rules, 'sim')[0] as CompiledRule<unknown>).spec : undefined;
  const s = result.summary;
  const delayed = s.delayed > 0 ? ` (${s.delayed} delayed, worst wait ${s.worstWaitMs} ms)` : '';
  return {
    title: describePolicy(policy),
    subtitle: `${s.requests} requests: ${s.admitted} admitted${delayed}, ${s.rejected} rejected; max ${s.busiest.count} admitted in any ${humanDuration(s.intervalMs)}`,
    records: result.records,
    busiest: s.busiest,
    intervalMs: s.intervalMs,
    windowMs: first === undefined ? undefined : registry[first.algorithm].boundaries(first),
  };
}
