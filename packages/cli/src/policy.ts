/**
 * Policies: the stack of rules a simulation runs, built from flags or from
 * the plain-data rule objects of a config file.
 *
 * Rules are the middleware's own `Rule` objects, compiled by core's `compileRules`, so
 * a policy that loads here is valid for `rateLimit({ rules })` and fails with the same
 * `TollgateError` codes when it is not. Only `key` differs, because a file cannot hold
 * a function: `"client"` (the default) counts per arrival key, `"global"` counts every
 * arrival together. A rule without `cost` charges each arrival its own cost.
 */
import {
  ALGORITHM_NAMES,
  type AlgorithmName,
  compileRules,
  constant,
  createThrottle,
  MemoryStore,
  type Reading,
  type ReadingName,
  type Rule,
  type RuleSpec,
  registry,
  type ThrottleOptions,
  takesOption,
  unknownOptionFix,
} from '@tollgate/core';
import type { Arrival } from './arrivals.js';
import { cliError, show } from './errors.js';

/** The throttle of a policy: core's `slowDown` options, without store or clock (the simulator brings its own). */
export type PolicyThrottle = Omit<ThrottleOptions<Arrival>, 'store' | 'clock' | 'prefix' | 'defaultKey' | 'skip'>;

/**
 * A named stack of rules deciding arrivals, optionally behind a throttle:
 * the throttle counts and delays at arrival, the rules decide when the delayed
 * request reaches them.
 */
export interface Policy {
  name: string;
  rules: Rule<Arrival>[];
  throttle?: PolicyThrottle | undefined;
}

/** A rule as written in a config file: core's rule with a `key` of `"client"` or `"global"`. */
export type PlainRule = Omit<Rule<Arrival>, 'key' | 'cost' | 'countIf'> & { key?: 'client' | 'global'; cost?: number };

/** Algorithm names the flags accept: core's (its registry's), then their named readings (leaky-meter, leaky-queue). */
export type AlgorithmChoice = AlgorithmName | ReadingName;

/** Each reading the registry names, with its algorithm and the options it sets. */
const READINGS = new Map<string, { algorithm: AlgorithmName; reading: Reading }>(
  ALGORITHM_NAMES.flatMap((algorithm) =>
    Object.entries(registry[algorithm].readings).map(([name, reading]) => [name, { algorithm, reading: reading as Reading }] as const),
  ),
);

export const ALGORITHM_CHOICES: readonly AlgorithmChoice[] = [...ALGORITHM_NAMES, ...(READINGS.keys() as Iterable<ReadingName>)];

/** What each reading is, for messages: `leaky-queue is leaky-bucket with mode queue`. */
const READINGS_TEXT = [...READINGS]
  .map(
    ([name, { algorithm, reading }]) =>
      `${name} is ${algorithm} with ${Object.entries(reading)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
  )
  .join('; ');

const arrivalKey = (a: Arrival): string => a.key;

/** How a key function reads in a file: `client` for the arrival's key, `global` otherwise. */
export function keyLabel(key: unknown): 'client' | 'global' {
  return key === undefined || key === arrivalKey ? 'client' : 'global';
}
const arrivalCost = (a: Arrival): number => a.cost;

/**
 * Turns plain rules (from a file or flags) into middleware rules and validates the stack.
 * @param path where the rules came from, for error messages (`policy.yaml rules`)
 * @throws TollgateError (core's codes) for a bad rule, CliError for a bad `key`
 */
export function toRules(plain: unknown, path: string): Rule<Arrival>[] {
  if (!Array.isArray(plain)) {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path,
      expected: 'a list of rules',
      received: show(plain),
      fix: 'Write rules: [{ name: "client", rate: "10/s" }].',
    });
  }
  const rules = plain.map((raw: unknown, i): Rule<Arrival> => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw as Rule<Arrival>; // core reports it
    const { key, ...rest } = raw as Record<string, unknown>;
    if (key !== undefined && key !== 'client' && key !== 'global') {
      throw cliError('TG_CLI_INVALID_CONFIG', {
        path: `${path}[${i}].key`,
        expected: '"client" (count per arrival key, the default) or "global" (count all arrivals together)',
        received: show(key),
        fix: 'A file cannot hold a key function; pick one of the two.',
      });
    }
    const rule = { ...rest, key: key === 'global' ? constant('global') : arrivalKey } as Rule<Arrival>;
    if (rule.cost === undefined) rule.cost = arrivalCost;
    return rule;
  });
  compileRules(rules, 'sim', path);
  return rules;
}

const THROTTLE_KEYS = ['window', 'delayAfter', 'delay', 'maxDelay', 'key', 'name'];

/**
 * Turns a plain throttle section (`window`, `delayAfter`, `delay` in ms, `maxDelay`,
 * `key`, `name`) into `slowDown` options and validates them with core's `createThrottle`.
 * @throws TollgateError (core's codes) for a bad option, CliError for a bad `key` or a non-number `delay`
 */
export function toThrottle(plain: unknown, path: string): PolicyThrottle {
  if (typeof plain !== 'object' || plain === null || Array.isArray(plain)) {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path,
      expected: 'a mapping such as { window: 10s, delayAfter: 2, delay: 500 }',
      received: show(plain),
      fix: 'Write the throttle options of slowDown.',
    });
  }
  const { key, ...rest } = plain as Record<string, unknown>;
  const unknown = Object.keys(rest).find((k) => !THROTTLE_KEYS.includes(k));
  if (unknown !== undefined || (key !== undefined && key !== 'client' && key !== 'global') || typeof rest.delay === 'string') {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path:
        unknown !== undefined
          ? `${path}.${unknown}`
          : key !== undefined && key !== 'client' && key !== 'global'
            ? `${path}.key`
            : `${path}.delay`,
      expected: `throttle options ${THROTTLE_KEYS.join(', ')}; key "client" or "global"; delay a number of ms`,
      received:
        unknown !== undefined ? show(unknown) : key !== undefined && key !== 'client' && key !== 'global' ? show(key) : show(rest.delay),
      fix: 'A file cannot hold functions: the delay is a fixed number of ms, or leave it out for the incremental default.',
    });
  }
  const throttle = { ...rest, key: key === 'global' ? constant('global') : arrivalKey } as PolicyThrottle;
  const store = new MemoryStore({ sweepIntervalMs: 0 });
  try {
    createThrottle({ ...throttle, store, name: throttle.name ?? 'slow-down' });
  } catch (err) {
    // Re-path core's message so it points into the file.
    if (err instanceof Error) err.message = err.message.replace(/^slowDown/, path);
    throw err;
  } finally {
    void store.close();
  }
  return throttle;
}

/** The flags that describe a one-rule policy. */
export interface RuleFlags {
  rate?: string | undefined;
  limit?: string | undefined;
  window?: string | undefined;
  burst?: string | undefined;
  queue?: string | undefined;
  align?: string | undefined;
  buckets?: string | undefined;
}

function whole(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  // Core validates the range; here only "is it a number at all".
  if (text.trim() === '' || Number.isNaN(n)) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', { path: flag, expected: 'a number', received: show(text), fix: `Pass ${flag} 10.` });
  }
  return n;
}

/** The rule flags of a parsed command line (`--rate`, `--limit`, `--window`, `--burst`, `--queue`, `--align`, `--buckets`). */
export function ruleFlags(v: Readonly<Record<string, unknown>>): RuleFlags {
  return {
    rate: v.rate as string | undefined,
    limit: v.limit as string | undefined,
    window: v.window as string | undefined,
    burst: v.burst as string | undefined,
    queue: v.queue as string | undefined,
    align: v.align as string | undefined,
    buckets: v.buckets as string | undefined,
  };
}

/**
 * Builds a one-rule policy from flags. With `lenient`, options that do not apply to
 * this algorithm (`--burst` for a sliding log) are left out instead of refused: that
 * is what `compare` needs when one set of flags describes several algorithms.
 * @example policyFromFlags('token-bucket', { rate: '10/s', burst: '5' })
 */
export function policyFromFlags(choice: string, flags: RuleFlags, lenient = false): Policy {
  if (!(ALGORITHM_CHOICES as readonly string[]).includes(choice)) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--algorithm',
      expected: `one of ${ALGORITHM_CHOICES.join(', ')}`,
      received: show(choice),
      fix: unknownOptionFix(choice, ALGORITHM_CHOICES, `Pick an algorithm; ${READINGS_TEXT}.`),
    });
  }
  const { algorithm, reading } = READINGS.get(choice) ?? { algorithm: choice as AlgorithmName, reading: {} };
  const def = registry[algorithm];
  const mode = reading.mode ?? 'meter';
  const rule: Record<string, unknown> = { name: choice, algorithm, ...reading };
  if (flags.rate !== undefined) rule.rate = flags.rate;
  if (flags.limit !== undefined) rule.limit = whole(flags.limit, '--limit');
  if (flags.window !== undefined) rule.window = /^\d+$/.test(flags.window) ? Number(flags.window) : flags.window;
  if (rule.rate === undefined && rule.limit === undefined && rule.window === undefined) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--rate',
      expected: 'a limit: --rate 10/s, or --limit 10 --window 1s',
      received: 'neither',
      fix: 'Say how many requests per how long, or pass --config with rules.',
    });
  }
  // Lenient: an option this algorithm (in this reading) does not take is left out.
  const keep = (option: 'burst' | 'queue' | 'align' | 'buckets'): boolean => !lenient || takesOption(def, option, mode);
  if (flags.burst !== undefined && keep('burst')) rule.burst = whole(flags.burst, '--burst');
  if (flags.queue !== undefined && keep('queue')) rule.queue = whole(flags.queue, '--queue');
  if (flags.align !== undefined && keep('align')) rule.align = flags.align;
  if (flags.buckets !== undefined && keep('buckets')) rule.buckets = whole(flags.buckets, '--buckets');
  return { name: choice, rules: toRules([rule], 'flags') };
}

/** The options a rule's algorithm takes, as people read them (an alignment only when not the default). */
function optionsText(s: RuleSpec): string[] {
  const def = registry[s.algorithm];
  const out: string[] = [];
  if (takesOption(def, 'burst', s.mode)) out.push(`burst ${s.burst}`);
  if (takesOption(def, 'queue', s.mode)) out.push(`queue ${s.queue}`);
  if (takesOption(def, 'align', s.mode) && s.align !== 'clock') out.push(`align ${s.align}`);
  if (takesOption(def, 'buckets', s.mode)) out.push(`${s.buckets} buckets`);
  return out;
}

/** One line per rule for people: `token-bucket 10 per 1 s, burst 5`. */
export function describePolicy(policy: Policy): string {
  const t = policy.throttle;
  const throttle = t
    ? [
        `${t.name ?? 'slow-down'}: throttle after ${t.delayAfter} in ${typeof t.window === 'number' ? `${t.window} ms` : t.window}, ${
          typeof t.delay === 'number' ? `delay ${t.delay} ms` : 'delay +1 s per extra hit'
        }${t.key !== arrivalKey ? ', global' : ''}`,
      ]
    : [];
  if (policy.rules.length === 0) return throttle.join('');
  const rules = compileRules(policy.rules, 'sim').map(({ spec: s, source }) => {
    const per = s.windowMs % 1000 === 0 ? `${s.windowMs / 1000} s` : `${s.windowMs} ms`;
    const def = registry[s.algorithm];
    const algorithm = def.options.includes('mode') ? `${s.algorithm} ${s.mode}` : s.algorithm;
    const extra = optionsText(s);
    if (s.blockForMs > 0) extra.push(`block ${s.blockForMs} ms`);
    const global = source.key !== arrivalKey ? ', global' : '';
    return `${s.name}: ${algorithm} ${s.limit} per ${per}${extra.length ? `, ${extra.join(', ')}` : ''}${global}`;
  });
  return [...throttle, ...rules].join('; ');
}
