// The playground's form, read into a rule and an arrival pattern, with errors written for
// the page: each names the field it is about and says what to write there, in the words
// of the form (never the CLI's flags).
import { generateArrivals, parsePattern, toRules } from '@tollgate/cli';
import { ALGORITHM_NAMES, parseRate, registry, takesOption } from '@tollgate/core';

/** The algorithm names a rule takes (`algorithm:`, core's registry), and the two modes of the leaky bucket. */
export const ALGORITHMS = [...ALGORITHM_NAMES];
export const MODES = ['meter', 'queue'];

/** A browser keeps a run short: at most this many requests within this many ms. */
export const MAX_REQUESTS = 400;
export const MAX_SPAN_MS = 30_000;

const PATTERN_HELP = 'burst N [at T] [over D], rate R for D [from T], poisson R for D [seed S] or boundary [N]';

/** A mistake in the form: `field` is the id of the input it is about. */
export class FormError extends Error {
  constructor(field, message) {
    super(message);
    this.name = 'FormError';
    this.field = field;
  }
}

function text(v) {
  return typeof v === 'string' ? v.trim() : typeof v === 'number' ? String(v) : '';
}

function quote(s) {
  return JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);
}

/** An optional whole number of at least 1; empty means "the limit". */
function places(v, field, label) {
  const s = text(v);
  if (s === '') return undefined;
  if (!/^\d{1,6}$/.test(s) || Number(s) < 1) {
    throw new FormError(
      field,
      `${label}: write a whole number of requests, at least 1 (got ${quote(s)}), or leave it empty to use the limit.`,
    );
  }
  return Number(s);
}

/** An optional count of blocks (1 to 1000); empty means the default, 10. */
function blocks(v) {
  const s = text(v);
  if (s === '') return undefined;
  if (!/^\d{1,4}$/.test(s) || Number(s) < 1 || Number(s) > 1000) {
    throw new FormError('buckets', `Buckets: write a whole number of blocks from 1 to 1000 (got ${quote(s)}), or leave it empty for 10.`);
  }
  return Number(s);
}

/**
 * The rule the form describes, as an app would write it (`{ name, algorithm, mode?, rate,
 * burst?, queue?, buckets? }`), and the policy the simulator and the server run.
 */
export function ruleOf(body) {
  const algorithm = text(body?.algorithm) || 'sliding-window';
  if (!ALGORITHMS.includes(algorithm)) {
    throw new FormError('algorithm', `Algorithm: pick one of ${ALGORITHMS.join(', ')} (got ${quote(algorithm)}).`);
  }
  const def = registry[algorithm];
  const moded = def.options.includes('mode');
  const mode = moded ? text(body?.mode) || 'meter' : undefined;
  if (mode !== undefined && !MODES.includes(mode)) {
    throw new FormError('mode', `Mode: a leaky bucket is a meter (refuses at once) or a queue (holds requests); got ${quote(mode)}.`);
  }
  const rate = text(body?.rate);
  try {
    parseRate(rate);
  } catch {
    throw new FormError('rate', `Limit: write a count per duration, such as 10/s, 600/min or 5/2s (got ${quote(rate)}).`);
  }
  const rule = { name: moded ? `${algorithm}-${mode}` : algorithm, algorithm };
  if (mode !== undefined) rule.mode = mode;
  rule.rate = rate;
  // The options this algorithm takes in this mode (the registry's), each from its field.
  const takes = (option) => takesOption(def, option, mode ?? 'meter');
  const burst = takes('burst') ? places(body?.burst, 'burst', 'Burst') : undefined;
  if (burst !== undefined) rule.burst = burst;
  const queue = takes('queue') ? places(body?.queue, 'queue', 'Queue') : undefined;
  if (queue !== undefined) rule.queue = queue;
  const buckets = takes('buckets') ? blocks(body?.buckets) : undefined;
  if (buckets !== undefined) rule.buckets = buckets;
  let rules;
  try {
    rules = toRules([rule], 'rule');
  } catch (err) {
    // What is left is a combination the limiter refuses (a limit too small for its window, say):
    // its own explanation, without the internal path.
    // (A TollgateError carries expected, received and fix itself.)
    const d = err?.expected !== undefined ? err : undefined;
    throw new FormError(
      String(err?.path ?? '').endsWith('.buckets') ? 'buckets' : 'rate',
      d ? `This rule is refused: expected ${d.expected}, got ${d.received}. ${d.fix}` : String(err?.message ?? err),
    );
  }
  return { rule, policy: { name: rule.name, rules } };
}

/** The arrivals of the pattern, bounded so that a run stays short. */
export function arrivalsOf(pattern, window) {
  const p = text(pattern);
  if (p === '') throw new FormError('pattern', `Arrival pattern: write one, such as "burst 20 at 0" (${PATTERN_HELP}).`);
  let arrivals;
  try {
    arrivals = generateArrivals([parsePattern(p)], window);
  } catch {
    throw new FormError(
      'pattern',
      `Arrival pattern: ${quote(p)} is not a pattern the playground knows. Write ${PATTERN_HELP}; times like 500ms or 2s.`,
    );
  }
  const last = arrivals[arrivals.length - 1];
  if (arrivals.length > MAX_REQUESTS || (last && last.t > MAX_SPAN_MS)) {
    throw new FormError(
      'pattern',
      `Arrival pattern: ${arrivals.length} requests over ${((last?.t ?? 0) / 1000).toFixed(1)} s is more than a run sends ` +
        `(at most ${MAX_REQUESTS} requests within ${MAX_SPAN_MS / 1000} s). Use a smaller pattern, or the tollgate CLI for big ones.`,
    );
  }
  if (arrivals.length === 0) throw new FormError('pattern', 'Arrival pattern: it makes no requests; ask for at least one.');
  return arrivals;
}
