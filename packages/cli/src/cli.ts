/**
 * The `tollgate` command: `run(argv, io)` parses the arguments, runs
 * `simulate` or `compare`, and reports through `io`, so tests call it as a function
 * and `bin/tollgate.js` calls it with the real process.
 *
 * Exit codes: 0 done, 1 unexpected failure, 2 bad usage or configuration, 3 Redis
 * unreachable or failed (`tollgate keys`, `compare --lease`).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { compileRules, TollgateError, unknownOptionFix } from '@tollgate/core';
import { COMPARE_OPTIONS, HELP, KEYS_OPTIONS, parse, RATE_TIMELINE_OPTIONS, SIMULATE_OPTIONS } from './args.js';
import { type Arrival, generateArrivals, parsePattern } from './arrivals.js';
import { byteRateSvg, byteRateTable, simulateByteRate } from './byte-rate.js';
import { parseConfig } from './config.js';
import { CliError, cliError, show } from './errors.js';
import { keysCommand } from './keys.js';
import { compareLeased, type LeasePlan, parseLease } from './lease.js';
import { ALGORITHM_CHOICES, describePolicy, keyLabel, type Policy, policyFromFlags, ruleFlags } from './policy.js';
import { createProgress } from './progress.js';
import { firstWindow, type SimulationResult, simulate } from './simulate.js';
import { panelOf, timelineSvg } from './svg.js';
import { againstExact, compareTable, leaseTable, requestTable, summaryLines } from './table.js';
import { humanDuration, parseTime } from './time.js';
import { parseTrace } from './trace.js';

/** Where the command reads and writes. `defaultIo` is the real process. */
export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
  readFile(path: string): Promise<string>;
  writeFile(path: string, data: string): Promise<void>;
  /** Wall-clock ms, for the progress indicator. */
  now(): number;
  /** stderr is a terminal. */
  isTTY: boolean;
}

export const defaultIo: Io = {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  readFile: (p) => readFile(p, 'utf8'),
  writeFile: (p, d) => writeFile(p, d),
  now: () => Date.now(),
  isTTY: process.stderr.isTTY === true,
};

const DEFAULT_COMPARE = ['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-queue'];
const VERSION = '0.1.0';

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

async function readInput(io: Io, path: string, flag: string): Promise<string> {
  try {
    return await io.readFile(path);
  } catch (err) {
    throw cliError(
      flag === '--trace' ? 'TG_CLI_INVALID_TRACE' : 'TG_CLI_INVALID_CONFIG',
      {
        path: `${flag} ${path}`,
        expected: 'a readable file',
        received: (err as NodeJS.ErrnoException).code ?? (err as Error).message,
        fix: 'Check the path (it is relative to the current directory).',
      },
      err,
    );
  }
}

function hasRuleFlags(v: Values): boolean {
  return ['rate', 'limit', 'window', 'burst', 'queue', 'align', 'buckets', 'algorithm', 'algorithms'].some((k) => v[k] !== undefined);
}

interface Setup {
  policies: Policy[];
  arrivals: Arrival[];
  source: { patterns: string[]; trace: string | null };
  intervalMs: number;
}

async function setup(v: Values, io: Io, command: 'simulate' | 'compare'): Promise<Setup> {
  const configs = await Promise.all(
    ((v.config as string[] | undefined) ?? []).map(async (f) => parseConfig(await readInput(io, f, '--config'), f)),
  );
  if (configs.length > 0 && hasRuleFlags(v)) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--config',
      expected: 'a policy from --config or from flags, not both',
      received: '--config together with rule flags',
      fix: 'Put every rule in the config file, or drop --config.',
    });
  }
  let policies: Policy[];
  if (configs.length > 0) {
    policies = configs.flatMap((c) => c.policies);
    if (command === 'simulate' && policies.length !== 1) {
      throw cliError('TG_CLI_INVALID_ARGUMENT', {
        path: '--config',
        expected: 'one policy for simulate',
        received: `${policies.length} policies`,
        fix: 'Use "tollgate compare" for several policies.',
      });
    }
  } else if (command === 'simulate') {
    policies = [policyFromFlags((v.algorithm as string | undefined) ?? 'sliding-window', ruleFlags(v))];
  } else {
    const names = ((v.algorithms as string | undefined) ?? DEFAULT_COMPARE.join(','))
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bad = names.find((n) => !(ALGORITHM_CHOICES as readonly string[]).includes(n));
    if (bad !== undefined || names.length === 0 || new Set(names).size !== names.length) {
      throw cliError('TG_CLI_INVALID_ARGUMENT', {
        path: '--algorithms',
        expected: `a comma-separated list of distinct names from ${ALGORITHM_CHOICES.join(', ')}`,
        received: show(v.algorithms),
        fix: 'For example --algorithms fixed-window,sliding-log.',
      });
    }
    policies = names.map((n) => policyFromFlags(n, ruleFlags(v), true));
  }
  const names = new Set<string>();
  for (const p of policies) {
    if (names.has(p.name)) {
      throw cliError('TG_CLI_INVALID_CONFIG', {
        path: `policy ${p.name}`,
        expected: 'policy names that differ',
        received: `two policies named ${show(p.name)}`,
        fix: 'Rename one (config files name their single policy after the file).',
      });
    }
    names.add(p.name);
  }

  const first = policies[0] as Policy;
  const target = firstWindow(first);
  const configPatterns = configs.flatMap((c) => c.patterns);
  const patterns = [...configPatterns, ...((v.pattern as string[] | undefined) ?? [])];
  const tracePath = v.trace as string | undefined;
  let arrivals: Arrival[];
  if (tracePath !== undefined) {
    if (patterns.length > 0) {
      throw cliError('TG_CLI_INVALID_ARGUMENT', {
        path: '--trace',
        expected: 'either a trace or patterns',
        received: 'both',
        fix: "Drop --pattern (or the config file's patterns) to replay a trace.",
      });
    }
    arrivals = parseTrace(await readInput(io, tracePath, '--trace'), tracePath);
  } else if (patterns.length > 0) {
    arrivals = generateArrivals(patterns.map(parsePattern), target);
  } else {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: `tollgate ${command}`,
      expected: 'arrivals: --pattern or --trace',
      received: 'neither',
      fix: 'For example --pattern "burst 20 at 0" or --pattern boundary.',
    });
  }
  const intervalText = (v.interval as string | undefined) ?? configs.find((c) => c.interval !== undefined)?.interval;
  const intervalMs = intervalText === undefined ? target.windowMs : parseTime(intervalText, '--interval', 1);
  return { policies, arrivals, source: { patterns, trace: tracePath ?? null }, intervalMs };
}

async function runAll(s: Setup, io: Io): Promise<SimulationResult[]> {
  const total = s.arrivals.length * s.policies.length;
  const progress = createProgress({ write: io.stderr, now: io.now, tty: io.isTTY });
  const results: SimulationResult[] = [];
  try {
    for (const [k, policy] of s.policies.entries()) {
      const base = k * s.arrivals.length;
      results.push(
        await simulate(policy, s.arrivals, {
          intervalMs: s.intervalMs,
          progressEvery: 5000,
          onProgress: (done) => progress.update(base + done, total),
        }),
      );
    }
  } finally {
    progress.finish();
  }
  return results;
}

function policyJson(p: Policy) {
  return {
    name: p.name,
    description: describePolicy(p),
    rules: p.rules.length > 0 ? compileRules(p.rules, 'sim').map(({ spec: { id: _id, ...spec } }) => spec) : [],
    ...(p.throttle ? { throttle: { ...p.throttle, key: keyLabel(p.throttle.key) } } : {}),
  };
}

function arrivalsLine(s: Setup): string {
  const from = s.source.trace !== null ? `trace ${s.source.trace}` : s.source.patterns.map((p) => `"${p}"`).join(' + ');
  return `${s.arrivals.length} arrivals from ${from}`;
}

async function simulateCommand(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, SIMULATE_OPTIONS, 'simulate');
  if (v.help) {
    io.stdout(HELP.simulate);
    return 0;
  }
  const rows = v.rows === undefined ? 100 : v.rows === 'all' ? Number.POSITIVE_INFINITY : Number(v.rows);
  if (!(rows >= 0) || (Number.isFinite(rows) && !Number.isInteger(rows))) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--rows',
      expected: 'a whole number or "all"',
      received: show(v.rows),
      fix: 'Pass --rows 50 or --rows all.',
    });
  }
  const s = await setup(v, io, 'simulate');
  const policy = s.policies[0] as Policy;
  const [result] = (await runAll(s, io)) as [SimulationResult];
  if (v.svg !== undefined) {
    await io.writeFile(
      v.svg as string,
      timelineSvg([panelOf(policy, result)], { title: `tollgate simulate: ${policy.name}`, note: arrivalsLine(s) }),
    );
  }
  if (v.json) {
    io.stdout(
      `${JSON.stringify({ command: 'simulate', policy: policyJson(policy), arrivals: { ...s.source, count: s.arrivals.length }, summary: result.summary, requests: result.records })}\n`,
    );
    return 0;
  }
  io.stdout(`policy: ${describePolicy(policy)}\n${arrivalsLine(s)}\n\n`);
  if (rows > 0) io.stdout(`${requestTable(result.records, rows)}\n\n`);
  io.stdout(`${summaryLines(result.summary)}\n`);
  if (v.svg !== undefined) io.stdout(`timeline written to ${v.svg}\n`);
  return 0;
}

/** `--lease` with `--redis` and `--instances`, or undefined; either of those without `--lease` is a usage error. */
function leasePlanOf(v: Values): { plan: LeasePlan; url: string } | undefined {
  if (v.lease === undefined) {
    const stray = ['redis', 'instances'].find((k) => v[k] !== undefined);
    if (stray === undefined) return undefined;
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: `--${stray}`,
      expected: `--${stray} only with --lease`,
      received: `--${stray} without --lease`,
      fix: 'Add the lease to simulate, e.g. --lease max=20,ttl=1s, or leave it out.',
    });
  }
  if (typeof v.redis !== 'string') {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--lease',
      expected: '--redis with --lease: leases are decided in Redis, so the simulation runs the real RedisStore on a real Redis',
      received: 'no --redis',
      fix: 'Pass a Redis the run may write to, e.g. --redis redis://127.0.0.1:6379 (its keys get a prefix of their own and expire).',
    });
  }
  return { plan: parseLease(v.lease as string, v.instances as string | undefined), url: v.redis };
}

/** `compare --lease`: each policy decided exactly and by `instances` instances holding leases. */
async function leaseCompare(s: Setup, lease: { plan: LeasePlan; url: string }, v: Values, io: Io): Promise<number> {
  const { plan } = lease;
  const progress = createProgress({ write: io.stderr, now: io.now, tty: io.isTTY });
  let runs: Awaited<ReturnType<typeof compareLeased>>;
  try {
    runs = await compareLeased(s.policies, s.arrivals, plan, lease.url, {
      intervalMs: s.intervalMs,
      progressEvery: 5000,
      onProgress: (done, total) => progress.update(done, total),
    });
  } finally {
    progress.finish();
  }
  const how = `${plan.instances} instance${plan.instances === 1 ? '' : 's'} (each request at one drawn at random), lease max ${plan.max}, ttl ${humanDuration(plan.ttlMs)}`;
  if (v.svg !== undefined) {
    const panels = s.policies.flatMap((p, k) => {
      const r = runs[k] as (typeof runs)[number];
      return [
        { ...panelOf(p, r.exact), title: `${describePolicy(p)}: exact` },
        { ...panelOf(p, r.leased), title: `${describePolicy(p)}: leased (${againstExact(r)} against exact)` },
      ];
    });
    const title = `tollgate compare --lease: ${s.policies.map((p) => p.name).join(', ')}`;
    await io.writeFile(v.svg as string, timelineSvg(panels, { title, note: `${arrivalsLine(s)}; ${how}` }));
  }
  if (v.json) {
    const policies = s.policies.map((p, k) => {
      const r = runs[k] as (typeof runs)[number];
      const shortened = (b: typeof r.shortened.exact) => ({ intervalMs: r.shortenedMs, ...b });
      return {
        ...policyJson(p),
        summary: r.exact.summary,
        shortened: shortened(r.shortened.exact),
        requests: r.exact.records,
        leased: {
          summary: r.leased.summary,
          shortened: shortened(r.shortened.leased),
          difference: r.leased.summary.admitted - r.exact.summary.admitted,
          requests: r.leased.records,
        },
      };
    });
    const arrivals = { ...s.source, count: s.arrivals.length };
    io.stdout(`${JSON.stringify({ command: 'compare', arrivals, intervalMs: s.intervalMs, lease: plan, policies })}\n`);
    return 0;
  }
  io.stdout(`${arrivalsLine(s)}\n${how}\n\n${leaseTable(runs)}\n\n`);
  for (const p of s.policies) io.stdout(`  ${describePolicy(p)}\n`);
  const shortened = humanDuration(runs[0]?.shortenedMs ?? s.intervalMs);
  io.stdout(
    `\nexact: one RedisStore decides every request; leased: each instance decides on its own store with the lease.
A leased unit is counted in Redis up to ttl before it is used: a sliding log keeps its limit in any
${shortened} (the interval less ttl), a token bucket admits at most B + r·(T + ttl) in any T.\n`,
  );
  if (v.svg !== undefined) io.stdout(`timeline written to ${v.svg}\n`);
  return 0;
}

async function compareCommand(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, COMPARE_OPTIONS, 'compare');
  if (v.help) {
    io.stdout(HELP.compare);
    return 0;
  }
  const lease = leasePlanOf(v);
  const s = await setup(v, io, 'compare');
  if (lease !== undefined) return await leaseCompare(s, lease, v, io);
  const results = await runAll(s, io);
  if (v.svg !== undefined) {
    const panels = s.policies.map((p, k) => panelOf(p, results[k] as SimulationResult));
    await io.writeFile(
      v.svg as string,
      timelineSvg(panels, { title: `tollgate compare: ${s.policies.map((p) => p.name).join(', ')}`, note: arrivalsLine(s) }),
    );
  }
  if (v.json) {
    const policies = s.policies.map((p, k) => ({
      ...policyJson(p),
      summary: (results[k] as SimulationResult).summary,
      requests: (results[k] as SimulationResult).records,
    }));
    io.stdout(
      `${JSON.stringify({ command: 'compare', arrivals: { ...s.source, count: s.arrivals.length }, intervalMs: s.intervalMs, policies })}\n`,
    );
    return 0;
  }
  io.stdout(`${arrivalsLine(s)}\n\n${compareTable(results)}\n\n`);
  for (const p of s.policies) io.stdout(`  ${describePolicy(p)}\n`);
  io.stdout('\nadmitted includes delayed requests; "max in" counts admitted requests by the time they reach the application.\n');
  if (v.svg !== undefined) io.stdout(`timeline written to ${v.svg}\n`);
  return 0;
}

function report(err: unknown, io: Io, json: boolean): number {
  if (err instanceof CliError || err instanceof TollgateError) {
    if (json) io.stdout(`${JSON.stringify({ error: { code: err.code, message: err.message, path: err.path ?? null } })}\n`);
    io.stderr(`tollgate: ${err.code}: ${err.message}\n`);
    return err.code === 'TG_CLI_REDIS_FAILED' ? 3 : 2;
  }
  io.stderr(`tollgate: unexpected failure: ${(err as Error)?.stack ?? String(err)}\n`);
  return 1;
}

/** `tollgate rate-timeline`: limitRate on a simulated link. */
async function rateTimelineCommand(args: string[], io: Io): Promise<number> {
  const { values: v } = parse(args, RATE_TIMELINE_OPTIONS, 'rate-timeline');
  if (v.help) {
    io.stdout(HELP['rate-timeline']);
    return 0;
  }
  if (typeof v.rate !== 'string') {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: 'rate-timeline --rate',
      expected: "a byte rate such as '2MB/s'",
      received: 'nothing',
      fix: 'Pass --rate 2MB/s (and --burst, --link as needed).',
    });
  }
  const str = (k: string) => (typeof v[k] === 'string' ? (v[k] as string) : undefined);
  const durationMs = parseTime(str('duration') ?? '10s', '--duration', 1);
  const stepMs = parseTime(str('step') ?? '10ms', '--step', 1);
  if (durationMs / stepMs > 100_000) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: 'rate-timeline --step',
      expected: 'at most 100000 steps in --duration',
      received: `${Math.ceil(durationMs / stepMs)} steps`,
      fix: 'Use a longer --step or a shorter --duration.',
    });
  }
  const burst = str('burst');
  const after = str('after');
  const run = await simulateByteRate({
    rate: v.rate,
    link: str('link') ?? '10MB/s',
    durationMs,
    stepMs,
    ...(burst !== undefined ? { burst } : {}),
    ...(after !== undefined ? { after } : {}),
  });
  const svg = str('svg');
  if (svg !== undefined) await io.writeFile(svg, byteRateSvg(run));
  if (v.json) io.stdout(`${JSON.stringify(run)}\n`);
  else io.stdout(byteRateTable(run));
  return 0;
}

/**
 * Runs the command line `argv` (without `node` and the script name).
 * @returns the exit code
 * @example await run(['simulate', '-a', 'fixed-window', '-r', '10/s', '-p', 'boundary'])
 */
export async function run(argv: readonly string[], io: Io = defaultIo): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case 'simulate':
        return await simulateCommand(args, io);
      case 'compare':
        return await compareCommand(args, io);
      case 'rate-timeline':
        return await rateTimelineCommand(args, io);
      case 'keys': {
        const [operation, ...rest] = args;
        if (operation === '--help' || operation === '-h' || operation === undefined) {
          io.stdout(HELP.keys);
          return 0;
        }
        const { values } = parse(rest, KEYS_OPTIONS, 'keys');
        if (values.help) {
          io.stdout(HELP.keys);
          return 0;
        }
        return await keysCommand(operation, values, io);
      }
      case undefined:
      case '--help':
      case '-h':
        io.stdout(HELP.main);
        return 0;
      case 'help': {
        const topic = args[0];
        io.stdout(topic === 'simulate' || topic === 'compare' || topic === 'keys' || topic === 'rate-timeline' ? HELP[topic] : HELP.main);
        return 0;
      }
      case '--version':
      case '-v':
        io.stdout(`${VERSION}\n`);
        return 0;
      default:
        throw cliError('TG_CLI_UNKNOWN_COMMAND', {
          path: 'tollgate',
          expected: 'a command: simulate, compare, keys, rate-timeline or help',
          received: show(command),
          fix: unknownOptionFix(command, ['simulate', 'compare', 'keys', 'rate-timeline', 'help'], 'Run "tollgate --help".'),
        });
    }
  } catch (err) {
    return report(err, io, args.includes('--json'));
  }
}
