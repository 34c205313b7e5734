/**
 * Plain-text tables for the terminal: the per-request table of `simulate`
 * and the side-by-side table of `compare`.
 */
import type { LeaseComparison } from './lease.js';
import type { SimulationResult } from './simulate.js';
import type { RequestRecord, Summary } from './stats.js';
import { humanDuration, seconds } from './time.js';

type Align = 'l' | 'r';

/** Lays out rows under headers, columns padded to their widest cell. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], align: readonly Align[]): string {
  const widths = headers.map((h) => h.length);
  for (const r of rows) for (let c = 0; c < widths.length; c++) widths[c] = Math.max(widths[c] as number, (r[c] ?? '').length);
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, c) => (align[c] === 'r' ? cell.padStart(widths[c] as number) : cell.padEnd(widths[c] as number)))
      .join('  ')
      .trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** The per-request table: arrival, key, decision, delay, departure, rule. */
export function requestTable(records: readonly RequestRecord[], limit: number): string {
  const shown = records.slice(0, limit);
  const withCost = records.some((r) => r.cost !== 1);
  const headers = ['#', 'arrival s', 'key', ...(withCost ? ['cost'] : []), 'decision', 'delay ms', 'departure s', 'rule'];
  const rows = shown.map((r) => [
    String(r.i + 1),
    seconds(r.arrival),
    r.key,
    ...(withCost ? [String(r.cost)] : []),
    r.decision === 'rejected' && r.retryAfterMs > 0 ? `rejected (retry ${r.retryAfterMs} ms)` : r.decision,
    r.delayMs > 0 ? String(r.delayMs) : '-',
    r.departure === null ? '-' : seconds(r.departure),
    r.rules.join(', ') || '-',
  ]);
  const align: Align[] = ['r', 'r', 'l', ...(withCost ? (['r'] as Align[]) : []), 'l', 'r', 'r', 'l'];
  const more = records.length - shown.length;
  return table(headers, rows, align) + (more > 0 ? `\n... ${more} more requests (show them with --rows all)` : '');
}

/** One line per figure of a run. */
export function summaryLines(s: Summary): string {
  const b = s.busiest;
  const where = b.count > 0 ? ` (from ${seconds(b.from)} s)` : '';
  return [
    `requests: ${s.requests}, admitted: ${s.admitted} (delayed: ${s.delayed}), rejected: ${s.rejected}`,
    `max admitted in any ${humanDuration(s.intervalMs)}: ${b.count}${b.units !== b.count ? ` requests, ${b.units} units` : ''}${where}`,
    `worst wait: ${s.worstWaitMs} ms`,
  ].join('\n');
}

/** The side-by-side table of `compare`: one row per policy. */
export function compareTable(results: readonly SimulationResult[]): string {
  const interval = results[0]?.summary.intervalMs ?? 1000;
  const headers = ['policy', 'admitted', 'rejected', 'delayed', `max in ${humanDuration(interval)}`, 'worst wait ms'];
  const rows = results.map(({ policy, summary: s }) => [
    policy,
    String(s.admitted),
    String(s.rejected),
    String(s.delayed),
    String(s.busiest.count),
    String(s.worstWaitMs),
  ]);
  return table(headers, rows, ['l', 'r', 'r', 'r', 'r', 'r']);
}

/** Units admitted with leases less units admitted exactly, signed, with the share of exact: `+3 (+0.6 %)`, `0`. */
export function againstExact(c: LeaseComparison): string {
  const d = c.leased.summary.admitted - c.exact.summary.admitted;
  const exact = c.exact.summary.admitted;
  if (d === 0 || exact === 0) return `${d > 0 ? '+' : ''}${d}`;
  return `${d > 0 ? '+' : ''}${d} (${d > 0 ? '+' : ''}${((100 * d) / exact).toFixed(1)} %)`;
}

/**
 * The table of `compare --lease`: per policy, the exact run and the leased one, the
 * difference, and the most admitted in any interval and in that interval less `ttl`.
 */
export function leaseTable(comparisons: readonly LeaseComparison[]): string {
  const interval = comparisons[0]?.exact.summary.intervalMs ?? 1000;
  const shortened = humanDuration(comparisons[0]?.shortenedMs ?? interval);
  const headers = ['policy', 'run', 'admitted', 'rejected', 'vs exact', `max in ${humanDuration(interval)}`, `max in ${shortened}`];
  const rows = comparisons.flatMap((c) => {
    const row = (name: string, how: string, s: Summary, against: string, short: number) => [
      name,
      how,
      String(s.admitted),
      String(s.rejected),
      against,
      String(s.busiest.count),
      String(short),
    ];
    return [
      row(c.exact.policy, 'exact', c.exact.summary, '-', c.shortened.exact.count),
      row('', 'leased', c.leased.summary, againstExact(c), c.shortened.leased.count),
    ];
  });
  return table(headers, rows, ['l', 'l', 'r', 'r', 'r', 'r', 'r']);
}
