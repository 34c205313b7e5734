/**
 * Arrival patterns: the requests a simulation replays.
 *
 * A pattern is one line of a small language, so that it reads the same on the command
 * line, in a config file and in the playground:
 *
 * - `burst N [at T] [over D]`: N requests at T, or spread evenly over [T, T+D)
 * - `rate R for D [from T]`: a constant rate (R as in rules: `20/s`, `600/min`)
 * - `poisson R for D [from T] [seed S]`: a seeded Poisson process of mean rate R
 * - `boundary [N] [at T] [span D]`: a boundary attack on the policy's window: N
 *   requests in the `span` before a window boundary and N in the `span` after it
 *   (defaults: N = the first rule's limit, T = its window, span = a tenth of it)
 *
 * Every pattern also takes `key K` (default `client`), `keys N` (spread over N clients
 * `K-1`..`K-N`, round robin) and `cost C` (default 1). Several patterns are merged by time.
 */
import { parseRate } from '@tollgate/core';
import { CliError, cliError, show } from './errors.js';
import { seededRandom } from './random.js';
import { MAX_TIME_MS, parseTime } from './time.js';

/** One request of a simulation. */
export interface Arrival {
  /** Arrival time, whole ms of simulated time. */
  t: number;
  key: string;
  cost: number;
  /** From a trace: the cost the request turned out to have (its `cost` reserved, then settled at this). */
  actual?: number;
}

/** The window a boundary attack aims at: the first rule's limit and window. */
export interface PatternTarget {
  limit: number;
  windowMs: number;
}

/** The most arrivals one simulation may generate. */
export const MAX_ARRIVALS = 5_000_000;

type Kind = 'burst' | 'rate' | 'poisson' | 'boundary';

const OPTIONS: Record<Kind, readonly string[]> = {
  burst: ['at', 'over', 'key', 'keys', 'cost'],
  rate: ['for', 'from', 'key', 'keys', 'cost'],
  poisson: ['for', 'from', 'seed', 'key', 'keys', 'cost'],
  boundary: ['at', 'span', 'key', 'keys', 'cost'],
};

const SYNTAX: Record<Kind, string> = {
  burst: 'burst N [at T] [over D]',
  rate: 'rate R for D [from T]',
  poisson: 'poisson R for D [from T] [seed S]',
  boundary: 'boundary [N] [at T] [span D]',
};

const EXAMPLES = '"burst 80 at 0", "burst 80 over 4s", "rate 20/s for 3s", "poisson 15/s for 10s seed 7", "boundary"';

/** A parsed pattern: its text (for reports) and a generator given the policy's window. */
export interface Pattern {
  readonly text: string;
  readonly kind: Kind;
  generate(target: PatternTarget): Arrival[];
}

function positiveWhole(text: string | undefined, path: string, what: string): number {
  const n = text === undefined ? Number.NaN : Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw cliError('TG_CLI_INVALID_PATTERN', {
      path,
      expected: `${what} as a positive whole number`,
      received: show(text),
      fix: 'Use a whole number of at least 1.',
    });
  }
  return n;
}

function tooMany(path: string, n: number): never {
  throw cliError('TG_CLI_INVALID_PATTERN', {
    path,
    expected: `at most ${MAX_ARRIVALS} arrivals`,
    received: `${Math.ceil(n)} arrivals`,
    fix: 'Shorten the pattern or lower its rate; for longer runs, split them.',
  });
}

/**
 * Parses one pattern line.
 * @example parsePattern('rate 20/s for 3s').generate({ limit: 10, windowMs: 1000 }).length // 60
 * @throws CliError TG_CLI_INVALID_PATTERN
 */
export function parsePattern(text: string): Pattern {
  const path = `pattern ${JSON.stringify(text)}`;
  const words = text.trim().split(/\s+/);
  const kind = words.shift() as Kind;
  if (!(kind in OPTIONS)) {
    throw cliError('TG_CLI_INVALID_PATTERN', {
      path,
      expected: `a pattern starting with burst, rate, poisson or boundary, such as ${EXAMPLES}`,
      received: show(kind ?? ''),
      fix: 'Run `tollgate simulate --help` for the pattern syntax.',
    });
  }
  let count: number | undefined;
  let rate: { limit: number; windowMs: number } | undefined;
  if (kind === 'burst' || (kind === 'boundary' && words[0] !== undefined && /^\d+$/.test(words[0]))) {
    count = positiveWhole(words.shift(), `${path} count`, 'the number of requests');
  } else if (kind === 'rate' || kind === 'poisson') {
    const r = words.shift();
    try {
      rate = parseRate(r, `${path} rate`);
    } catch (err) {
      throw cliError(
        'TG_CLI_INVALID_PATTERN',
        {
          path,
          expected: `a rate after "${kind}" such as "20/s" or "600/min" (${SYNTAX[kind]})`,
          received: show(r),
          fix: 'Write the rate as a count, a slash and a unit.',
        },
        err,
      );
    }
  }
  const opts = new Map<string, string>();
  while (words.length > 0) {
    const name = words.shift() as string;
    const value = words.shift();
    if (!OPTIONS[kind].includes(name) || value === undefined || opts.has(name)) {
      throw cliError('TG_CLI_INVALID_PATTERN', {
        path,
        expected: `${SYNTAX[kind]}, each option once with a value, and optionally key K, keys N, cost C`,
        received: value === undefined ? `${show(name)} without a value` : opts.has(name) ? `${show(name)} twice` : show(name),
        fix: `Options of ${kind}: ${OPTIONS[kind].join(', ')}.`,
      });
    }
    opts.set(name, value);
  }
  const time = (name: string, fallback: number | undefined, min = 0): number | undefined => {
    const v = opts.get(name);
    if (v === undefined) return fallback;
    try {
      return parseTime(v, `${path} ${name}`, min);
    } catch (err) {
      throw cliError(
        'TG_CLI_INVALID_PATTERN',
        {
          path: `${path} ${name}`,
          expected: 'a time such as 0, 250ms, 1.5s or 2m (whole ms, at most a day)',
          // parseTime's reading says why (a misspelt unit, '1M', a fraction of a ms).
          received: err instanceof CliError ? err.received : show(v),
          fix: 'Write it in ms or with a unit: ms, s (sec, second), m (min, minute), h (hr, hour).',
        },
        err,
      );
    }
  };
  const key = opts.get('key') ?? 'client';
  if (!/^[\x21-\x7e]{1,64}$/.test(key)) {
    throw cliError('TG_CLI_INVALID_PATTERN', {
      path: `${path} key`,
      expected: '1 to 64 visible ASCII characters',
      received: show(key),
      fix: 'Use a short key such as "alice".',
    });
  }
  const keys = opts.has('keys') ? positiveWhole(opts.get('keys'), `${path} keys`, 'the number of clients') : 1;
  const cost = opts.has('cost') ? positiveWhole(opts.get('cost'), `${path} cost`, 'the cost') : 1;
  const keyOf = keys === 1 ? () => key : (i: number) => `${key}-${(i % keys) + 1}`;
  const from = time(kind === 'rate' || kind === 'poisson' ? 'from' : 'at', 0) as number;
  const span = kind === 'rate' || kind === 'poisson' ? time('for', undefined, 1) : undefined;
  if ((kind === 'rate' || kind === 'poisson') && span === undefined) {
    throw cliError('TG_CLI_INVALID_PATTERN', {
      path,
      expected: `a length after "for" (${SYNTAX[kind]})`,
      received: 'no "for"',
      fix: `Add how long it lasts, e.g. "${kind} 20/s for 3s".`,
    });
  }
  const over = time('over', 0);
  const attackAt = opts.has('at') ? from : undefined;
  const attackSpan = time('span', undefined, 1);
  const seed = opts.has('seed') ? Number(opts.get('seed')) : 1;
  if (!Number.isSafeInteger(seed)) {
    throw cliError('TG_CLI_INVALID_PATTERN', {
      path: `${path} seed`,
      expected: 'a whole number',
      received: show(opts.get('seed')),
      fix: 'Any whole number works; the same seed gives the same arrivals.',
    });
  }

  function generate(target: PatternTarget): Arrival[] {
    const out: Arrival[] = [];
    const push = (t: number) => {
      if (out.length >= MAX_ARRIVALS) tooMany(path, out.length + 1);
      out.push({ t, key: keyOf(out.length), cost });
    };
    switch (kind) {
      case 'burst': {
        const n = count as number;
        if (n > MAX_ARRIVALS) tooMany(path, n);
        for (let i = 0; i < n; i++) push(from + Math.floor((i * (over as number)) / n));
        break;
      }
      case 'rate': {
        const { limit, windowMs } = rate as { limit: number; windowMs: number };
        // k-th arrival at from + k·W/L for k·W/L < D, rounded to whole ms.
        const n = Math.ceil(((span as number) * limit) / windowMs);
        if (n > MAX_ARRIVALS) tooMany(path, n);
        for (let k = 0; k < n; k++) push(from + Math.round((k * windowMs) / limit));
        break;
      }
      case 'poisson': {
        const { limit, windowMs } = rate as { limit: number; windowMs: number };
        const perMs = limit / windowMs;
        if ((span as number) * perMs > MAX_ARRIVALS) tooMany(path, (span as number) * perMs);
        const random = seededRandom(seed);
        let t = 0;
        for (;;) {
          t += -Math.log(1 - random()) / perMs;
          if (t >= (span as number)) break;
          push(from + Math.floor(t));
        }
        break;
      }
      case 'boundary': {
        const n = count ?? target.limit;
        const at = attackAt ?? target.windowMs;
        const width = attackSpan ?? Math.max(1, Math.floor(target.windowMs / 10));
        if (at < width) {
          throw cliError('TG_CLI_INVALID_PATTERN', {
            path,
            expected: 'a boundary time at least one span after 0',
            received: `at ${at} ms with a span of ${width} ms`,
            fix: 'Move the boundary later or shorten the span.',
          });
        }
        if (2 * n > MAX_ARRIVALS) tooMany(path, 2 * n);
        for (let i = 0; i < n; i++) push(at - width + Math.floor((i * width) / n));
        for (let i = 0; i < n; i++) push(at + Math.floor((i * width) / n));
        break;
      }
    }
    const last = out[out.length - 1];
    if (last !== undefined && last.t > MAX_TIME_MS) {
      throw cliError('TG_CLI_INVALID_PATTERN', {
        path,
        expected: 'arrivals within the first day of simulated time',
        received: `an arrival at ${last.t} ms`,
        fix: 'Start the pattern earlier or make it shorter.',
      });
    }
    return out;
  }

  return { text: text.trim(), kind, generate };
}

/** Generates and merges several patterns, ordered by time (ties keep pattern order). */
export function generateArrivals(patterns: readonly Pattern[], target: PatternTarget): Arrival[] {
  const all = patterns.flatMap((p) => p.generate(target));
  if (all.length > MAX_ARRIVALS) tooMany('patterns', all.length);
  // Array.prototype.sort is stable, so equal times keep their pattern order.
  return all.sort((a, b) => a.t - b.t);
}

/**
 * The instance each of `count` arrivals goes to, as a load balancer choosing at random
 * would send it: drawn from `seededRandom(seed)`, so a run repeats.
 * @example instancesOf(3, 4) // e.g. Uint16Array [2, 0, 3]
 */
export function instancesOf(count: number, instances: number, seed = 1): Uint16Array {
  const random = seededRandom(seed);
  const out = new Uint16Array(count);
  for (let i = 0; i < count; i++) out[i] = Math.floor(random() * instances);
  return out;
}
