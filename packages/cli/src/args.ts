/**
 * Command-line arguments: `node:util` `parseArgs` for each command, and the
 * `--help` text of each. Usage errors become `TG_CLI_INVALID_ARGUMENT` with the fix.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { unknownOptionFix } from '@tollgate/core';
import { CliError, cliError, show } from './errors.js';
import { ALGORITHM_CHOICES } from './policy.js';

const POLICY_OPTIONS = {
  config: { type: 'string', short: 'c', multiple: true },
  rate: { type: 'string', short: 'r' },
  limit: { type: 'string' },
  window: { type: 'string' },
  burst: { type: 'string' },
  queue: { type: 'string' },
  align: { type: 'string' },
  buckets: { type: 'string' },
  pattern: { type: 'string', short: 'p', multiple: true },
  trace: { type: 'string', short: 't' },
  interval: { type: 'string', short: 'i' },
  svg: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const SIMULATE_OPTIONS = { ...POLICY_OPTIONS, algorithm: { type: 'string', short: 'a' }, rows: { type: 'string' } } as const;
export const COMPARE_OPTIONS = {
  ...POLICY_OPTIONS,
  algorithms: { type: 'string', short: 'a' },
  lease: { type: 'string' },
  instances: { type: 'string' },
  redis: { type: 'string' },
} as const;

export const RATE_TIMELINE_OPTIONS = {
  rate: { type: 'string', short: 'r' },
  burst: { type: 'string' },
  link: { type: 'string' },
  after: { type: 'string' },
  duration: { type: 'string', short: 'd' },
  step: { type: 'string' },
  svg: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const KEYS_OPTIONS = {
  redis: { type: 'string', multiple: true },
  cluster: { type: 'boolean' },
  prefix: { type: 'string' },
  'limiter-prefix': { type: 'string' },
  'hash-tag': { type: 'string' },
  timeout: { type: 'string' },
  rule: { type: 'string' },
  key: { type: 'string', short: 'k' },
  ip: { type: 'string' },
  'ipv6-subnet': { type: 'string' },
  for: { type: 'string' },
  units: { type: 'string', short: 'n' },
  id: { type: 'string' },
  config: { type: 'string', short: 'c' },
  rate: { type: 'string', short: 'r' },
  limit: { type: 'string' },
  window: { type: 'string' },
  algorithm: { type: 'string', short: 'a' },
  burst: { type: 'string' },
  queue: { type: 'string' },
  align: { type: 'string' },
  buckets: { type: 'string' },
  group: { type: 'string' },
  'block-for': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const PATTERNS = `Arrival patterns (--pattern, repeatable; merged by time):
  burst N [at T] [over D]             N requests at T, or spread evenly over [T, T+D)
  rate R for D [from T]               constant rate, e.g. "rate 20/s for 3s"
  poisson R for D [from T] [seed S]   seeded Poisson arrivals of mean rate R
  boundary [N] [at T] [span D]        N requests just before a window boundary and N
                                      just after (defaults: the first rule's limit,
                                      its window, a tenth of the window)
  Every pattern also takes: key K (default "client"), keys N (N clients), cost C.
  Times: 0, 250 (ms), 250ms, 1.5s, 2m, 1minute.
  Or replay a CSV trace with --trace file.csv: lines of time,key,cost
  (time in ms or with a unit; key and cost optional; a header line is skipped).`;

/** The algorithm choices (the registry's names and readings), wrapped under the -a flag's text. */
const ALGORITHM_LIST = ALGORITHM_CHOICES.map((c) => (c === 'sliding-window' ? `${c} (default)` : c))
  .join(', ')
  .replace(/(.{1,56})(?:, |$)/g, (_, line: string, offset: number, all: string) =>
    offset + line.length + 2 <= all.length ? `${line},\n                          ` : line,
  );

const POLICY_HELP = `  -r, --rate <R>          limit as a rate: 10/s, 600/min, 5/15m
      --limit <L> --window <W>   or as a limit and a window (W: 1s, 1m, or ms)
      --burst <B>         token-bucket / leaky-meter capacity (default: the limit)
      --queue <Q>         leaky-queue places (default: the limit)
      --align <A>         fixed-window: clock (default) or first-request
      --buckets <N>       sliding-buckets: blocks per window (default 10)
  -c, --config <file>     JSON or YAML with the middleware's rule objects, and
                          optionally a throttle in front of them (see docs/cli.md)`;

const OUTPUT_HELP = `  -p, --pattern <text>    arrival pattern (repeatable; see below)
  -t, --trace <file>      CSV trace to replay instead of patterns
  -i, --interval <len>    length of the sliding interval for "max admitted in any"
                          (default: the first rule's window)
      --svg <file>        write an SVG timeline
      --json              print JSON instead of tables (for scripts)
  -h, --help              show this help`;

export const HELP = {
  main: `tollgate: see what a rate-limit policy does before you deploy it.

Usage:
  tollgate simulate [options]   run one policy on a virtual clock
  tollgate compare [options]    run several algorithms on the same arrivals
  tollgate keys <op> [options]  read, reset, block, unblock, penalize or reward
                                a key in an application's Redis
  tollgate rate-timeline [options]
                                a byte-rate limit (limitRate) on a simulated link
  tollgate help <command>       help for a command

simulate and compare run the real @tollgate/core limiter (memory store, same code
as production) on simulated time; compare --lease runs RedisStore's leases on a real Redis. Run "tollgate <command> --help" for the options.
`,
  'rate-timeline': `Usage: tollgate rate-timeline --rate <R> [options]

Runs limitRate's byte bucket (the real @tollgate/core code, memory store) on a simulated
link and prints the throughput over time: with a full bucket the client gets the link's
speed for burst / (link - rate), then the rate.

  -r, --rate <R>          bytes per second: 2MB/s, 512KiB/s
      --burst <B>         bucket size: 16MB, 100KiB (default: one second of rate)
      --link <M>          the link's speed (default: 10MB/s)
      --after <A>         bytes sent unpaced first (default: 0)
  -d, --duration <len>    simulated time (default: 10s)
      --step <len>        simulation step (default: 10ms)
      --svg <file>        write the chart (throughput and bytes received) as SVG
      --json              print the run as JSON

Example:
  tollgate rate-timeline --rate 2MB/s --burst 16MB --link 10MB/s --duration 6s --svg rate.svg
`,
  keys: `Usage: tollgate keys <get|reset|block|unblock|penalize|reward> [options]

Operates on one key's state for one rule in the Redis an application's RedisStore
uses: the same operation as limiter.get / reset / block / unblock / penalize /
reward, on the same keys (one atomic call each). Prints the state after it.

Where:
      --redis <url>       redis://[user:password@]host:port[/db] (rediss:// for TLS)
      --cluster           a Redis Cluster: --redis names seed nodes (repeatable)
      --prefix <p>        the RedisStore's prefix option (default: none)
      --limiter-prefix <p> the limiter's prefix option (default: tg)
      --hash-tag <tag>    the tag the application's hashTag returns for this key
      --timeout <ms>      deadline of the Redis call (default 2000)

What:
      --rule <name>       the rule's name
  -k, --key <key>         the key, as the rule's key function returns it
      --ip <address>      or an address, keyed as ip() keys it
      --ipv6-subnet <n>   ip()'s ipv6Subnet (default 56; false for whole addresses)
      --for <duration>    block: how long (15m, 1h, 1d)
  -n, --units <n>         penalize / reward: how many units
      --id <id>           an operation id: a change retried with the same id is
                          not made twice (block, unblock, penalize, reward)

The rule as the application defines it (its state is kept per algorithm and window):
  -a, --algorithm <name>  as for simulate (default sliding-window)
  -r, --rate <R>  or  --limit <L> --window <W>,  --burst, --queue, --align,
                          --buckets, --group
      --block-for <d>     the rule's blockFor
  -c, --config <file>     or a JSON/YAML file with the rules (simulate's format)

      --json              print JSON (for scripts)
  -h, --help              show this help

Exit codes: 0 done, 2 bad usage, 3 Redis unreachable or failed, or no answer in
time (then it may have been applied: check with get, retry with the same --id).

Examples:
  tollgate keys get --redis redis://localhost:6379 --rule ip --rate 100/min --ip 203.0.113.7
  tollgate keys unblock --redis redis://localhost:6379 -c rules.yaml --rule login --ip 203.0.113.7
  tollgate keys block --redis redis://localhost:6379 --rule ip --rate 100/min --key 203.0.113.7 --for 1h --json
  tollgate keys penalize --redis redis://localhost:6379 --rule api --rate 1000/h -a token-bucket --key acme --units 50
`,
  simulate: `Usage: tollgate simulate [options]

Runs one policy (flags, or a stack of rules from --config) against arrivals and
prints each request's fate (arrival, key, decision, delay, departure, rule), the
totals, and the most admitted in any sliding interval.

Policy:
  -a, --algorithm <name>  ${ALGORITHM_LIST}
${POLICY_HELP}

Arrivals and output:
${OUTPUT_HELP}
      --rows <n|all>      requests shown in the table (default 100)

${PATTERNS}

Examples:
  tollgate simulate -a fixed-window -r 10/s -p boundary --svg boundary.svg
  tollgate simulate -a token-bucket -r 10/s --burst 5 -p "burst 20 at 0" -p "rate 5/s for 4s from 1s"
  tollgate simulate -c policy.yaml --trace access.csv --interval 1m --json
`,
  compare: `Usage: tollgate compare [options]

Runs several algorithms (or several policies from config files) on the same
arrivals and prints them side by side: admitted, rejected, delayed, the most
admitted in any interval of the chosen length, and the worst wait.

Policies:
  -a, --algorithms <list> comma-separated (default: fixed-window,sliding-log,
                          sliding-window,token-bucket,leaky-queue); all share
                          the limit flags below (--burst, --queue and --buckets
                          apply where they make sense)
${POLICY_HELP}
                          (repeatable: every file's policies are added)

Leases (RedisStore's lease option; see docs/distributed.md):
      --lease max=N,ttl=D decide each policy exactly, then with leases at
                          --instances instances, side by side (e.g. max=20,ttl=1s)
      --instances <n>     instances sharing the limits (default 1); each request
                          goes to one drawn at random (seeded: a run repeats)
      --redis <url>       required with --lease: leases are decided in Redis, so
                          the run uses the real RedisStore on a real Redis (its
                          keys get a prefix of their own and expire)

Arrivals and output:
${OUTPUT_HELP}

${PATTERNS}

Examples:
  tollgate compare -r 10/s -p "burst 80 over 4s" --svg burst.svg
  tollgate compare -r 100/10s -p "poisson 30/s for 60s" --instances 4 --lease max=20,ttl=1s --redis redis://127.0.0.1:6379
  tollgate compare -a fixed-window,sliding-log -r 10/s -p boundary
  tollgate compare -a fixed-window,sliding-buckets,sliding-log -r 10/s --buckets 5 -p boundary
  tollgate compare -c strict.yaml -c lenient.yaml --trace access.csv
`,
} as const;

/** Parses a command's arguments; unknown flags and missing values are usage errors. */
export function parse(
  args: string[],
  options: NonNullable<ParseArgsConfig['options']>,
  command: string,
): { values: Record<string, string | boolean | (string | boolean)[] | undefined> } {
  let parsed: ReturnType<typeof parseArgs> & { tokens?: unknown[] };
  try {
    parsed = parseArgs({ args, options, allowPositionals: false, strict: true, tokens: true });
  } catch (err) {
    if (err instanceof CliError) throw err;
    const message = (err as Error).message.split('\n')[0] ?? '';
    // Node names the unknown flag in quotes: "Unknown option '--rat'".
    const flag = /^Unknown option '(--?[^']+)'/.exec(message)?.[1];
    const flags = Object.entries(options).flatMap(([name, o]) => [`--${name}`, ...(o.short ? [`-${o.short}`] : [])]);
    throw cliError(
      'TG_CLI_INVALID_ARGUMENT',
      {
        path: `tollgate ${command}`,
        expected: 'the options listed by --help',
        received: message.replace(/\.$/, ''),
        fix: flag === undefined ? `Run "tollgate ${command} --help".` : unknownOptionFix(flag, flags, `Run "tollgate ${command} --help".`),
      },
      err,
    );
  }
  repeatedOnce(parsed.tokens ?? [], options, command);
  return { values: parsed.values };
}

/**
 * An option that takes one value, given twice, is a usage error: parseArgs keeps the last
 * one silently, so `--key a --key b` acted on b (and `-r 10/s -r 20/s` simulated 20/s).
 */
function repeatedOnce(tokens: unknown[], options: NonNullable<ParseArgsConfig['options']>, command: string): void {
  const seen = new Map<string, string | undefined>();
  for (const t of tokens as { kind: string; name?: string; value?: string }[]) {
    if (t.kind !== 'option' || t.name === undefined) continue;
    const o = options[t.name];
    if (o === undefined || o.multiple === true || o.type === 'boolean') continue;
    if (seen.has(t.name)) {
      throw cliError('TG_CLI_INVALID_ARGUMENT', {
        path: `--${t.name}`,
        expected: 'one value',
        received: `${show(seen.get(t.name))} and ${show(t.value)}`,
        fix: `Give --${t.name} once (run "tollgate ${command}" again for another value).`,
      });
    }
    seen.set(t.name, t.value);
  }
}
