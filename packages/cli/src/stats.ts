/**
 * Figures about a simulated run: counts, the worst wait, and the most that
 * got through in any sliding interval of a chosen length.
 */

/** What happened to one request. */
export type Verdict = 'admitted' | 'delayed' | 'rejected';

/** One simulated request and its fate. */
export interface RequestRecord {
  /** Position in the arrivals (0-based). */
  i: number;
  /** Arrival time, ms. */
  arrival: number;
  key: string;
  cost: number;
  decision: Verdict;
  /** Time spent waiting (leaky queue); 0 unless delayed. */
  delayMs: number;
  /** When the request reaches the application: arrival + delay; null when rejected. */
  departure: number | null;
  /** Rules that rejected it, or that delayed it. */
  rules: string[];
  /** For a rejected request: how long until the same request would be admitted (0: never). */
  retryAfterMs: number;
  /** The instance that decided it, when several did (`compare --lease`). */
  instance?: number;
}

/** The busiest interval of the run. */
export interface Busiest {
  /** Requests that reached the application within [from, from + length). */
  count: number;
  /** Their total cost. */
  units: number;
  /** Start of the first such interval (ms); 0 when nothing was admitted. */
  from: number;
}

export interface Summary {
  requests: number;
  /** Requests let through, delayed ones included. */
  admitted: number;
  /** Of the admitted, how many waited first. */
  delayed: number;
  rejected: number;
  /** Length of the sliding interval `busiest` is measured over, ms. */
  intervalMs: number;
  busiest: Busiest;
  /** Longest delay of any request, ms. */
  worstWaitMs: number;
  /** Last departure (or arrival, if nothing was admitted), ms. */
  endMs: number;
}

/**
 * The most admitted requests whose departure falls in one half-open interval
 * [s, s + length). Half-open because that is how every algorithm counts: an entry
 * exactly one window old has expired. Ties are broken by request count, then units.
 */
export function busiest(records: readonly RequestRecord[], length: number): Busiest {
  const passed = records.filter((r) => r.departure !== null).sort((a, b) => (a.departure as number) - (b.departure as number));
  let best: Busiest = { count: 0, units: 0, from: 0 };
  let lo = 0;
  let units = 0;
  for (let hi = 0; hi < passed.length; hi++) {
    const h = passed[hi] as RequestRecord;
    units += h.cost;
    // Drop everything at or before departure(hi) - length: it is outside [d - length + 1 ... d].
    while ((passed[lo] as RequestRecord).departure! <= h.departure! - length) {
      units -= (passed[lo] as RequestRecord).cost;
      lo++;
    }
    const count = hi - lo + 1;
    if (count > best.count || (count === best.count && units > best.units)) {
      best = { count, units, from: (passed[lo] as RequestRecord).departure as number };
    }
  }
  return best;
}

/** Totals of a run. */
export function summarize(records: readonly RequestRecord[], intervalMs: number): Summary {
  let admitted = 0;
  let delayed = 0;
  let worstWaitMs = 0;
  let endMs = 0;
  for (const r of records) {
    if (r.decision !== 'rejected') admitted++;
    if (r.decision === 'delayed') delayed++;
    if (r.delayMs > worstWaitMs) worstWaitMs = r.delayMs;
    endMs = Math.max(endMs, r.departure ?? r.arrival);
  }
  return {
    requests: records.length,
    admitted,
    delayed,
    rejected: records.length - admitted,
    intervalMs,
    busiest: busiest(records, intervalMs),
    worstWaitMs,
    endMs,
  };
}
