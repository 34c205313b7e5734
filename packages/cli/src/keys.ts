/**
 * `tollgate keys get|reset|block|unblock|penalize|reward`: operations by key against the
 * Redis an application's `RedisStore` uses, for operators.
 *
 * A rule's state lives under an id that holds its kind (algorithm and window, e.g.
 * `tg:login:f900000`), so the command needs the rule's definition as the application
 * wrote it: flags (`--rate 5/15m --algorithm fixed-window`) or the rules of a config file
 * (`--config rules.yaml`, the simulator's format). It builds a limiter of that one rule on
 * a `RedisStore` and calls the limiter's own operation, so the keys, the sanitising and the
 * arithmetic are the application's (the same library function in Redis).
 */
import type { Duration, KeyState, Rule } from '@tollgate/core';
import { createLimiter, ipKey, TollgateError } from '@tollgate/core';
import { parseConfig } from './config.js';
import { cliError, show } from './errors.js';
import { policyFromFlags, ruleFlags } from './policy.js';
import { openRedis } from './redis-client.js';

export const KEY_OPERATIONS = ['get', 'reset', 'block', 'unblock', 'penalize', 'reward'] as const;
export type KeyOperationChoice = (typeof KEY_OPERATIONS)[number];

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** What the command needs of its environment: the config file reader and the output. */
export interface KeysIo {
  stdout(text: string): void;
  readFile(path: string): Promise<string>;
}

function required(v: Values, flag: string, why: string): string {
  const value = v[flag];
  if (typeof value !== 'string' || value === '') {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: `--${flag}`,
      expected: why,
      received: value === undefined ? 'nothing' : show(value),
      fix: `Pass --${flag} (see "tollgate keys --help").`,
    });
  }
  return value;
}

/** The rule named `--rule`, from `--config` or from the rule flags. */
async function ruleOf(v: Values, io: KeysIo, name: string): Promise<Rule> {
  const config = v.config as string | undefined;
  const flags = ['rate', 'limit', 'window', 'burst', 'queue', 'align', 'buckets', 'algorithm', 'group', 'block-for'].filter(
    (k) => v[k] !== undefined,
  );
  if (config !== undefined) {
    if (flags.length > 0) {
      throw cliError('TG_CLI_INVALID_ARGUMENT', {
        path: '--config',
        expected: 'the rule from --config or from flags, not both',
        received: `--config together with --${flags[0]}`,
        fix: 'Keep the rule in the config file, or drop --config.',
      });
    }
    let text: string;
    try {
      text = await io.readFile(config);
    } catch (err) {
      throw cliError(
        'TG_CLI_INVALID_CONFIG',
        {
          path: `--config ${config}`,
          expected: 'a readable file',
          received: (err as NodeJS.ErrnoException).code ?? (err as Error).message,
          fix: 'Check the path.',
        },
        err,
      );
    }
    const rules = parseConfig(text, config).policies.flatMap((p) => p.rules);
    const rule = rules.find((r) => r.name === name);
    if (rule === undefined) {
      throw cliError('TG_CLI_INVALID_ARGUMENT', {
        path: '--rule',
        expected: `the name of a rule in ${config} (${rules.map((r) => r.name).join(', ')})`,
        received: show(name),
        fix: 'Name the rule as the application names it.',
      });
    }
    // A file's key ('client' or 'global') is the simulator's: an operation names its key.
    const { key: _key, ...own } = rule;
    return own as Rule;
  }
  if (v.rate === undefined && v.limit === undefined) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: 'tollgate keys',
      expected: "the rule's definition: --rate (or --limit and --window) and --algorithm as the application has them, or --config",
      received: 'neither',
      fix: 'The state is kept per algorithm and window: e.g. --rate 100/min --algorithm sliding-window.',
    });
  }
  const [plain] = policyFromFlags((v.algorithm as string | undefined) ?? 'sliding-window', ruleFlags(v)).rules as [Rule];
  const { key: _key, cost: _cost, ...own } = plain;
  const rule: Record<string, unknown> = { ...own, name };
  if (v.group !== undefined) rule.group = v.group;
  if (v['block-for'] !== undefined) rule.blockFor = v['block-for'];
  return rule as unknown as Rule;
}

/** The key: `--key` as given, or `--ip` keyed as `ip()` keys it. */
function keyOf(v: Values): string {
  const key = v.key as string | undefined;
  const ip = v.ip as string | undefined;
  if ((key === undefined) === (ip === undefined)) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--key',
      expected: "one key: --key (as the rule's key function returns it) or --ip (an address, keyed as ip() keys it)",
      received: key === undefined ? 'neither' : 'both',
      fix: 'Pass --key 203.0.113.7, or --ip 2001:db8::7 --ipv6-subnet 56.',
    });
  }
  if (key !== undefined) return key;
  const subnet = v['ipv6-subnet'] as string | undefined;
  const bits = subnet === undefined ? 56 : subnet === 'false' ? false : Number(subnet);
  return ipKey(ip as string, { ipv6Subnet: bits });
}

function whole(text: unknown, flag: string): number {
  const n = Number(text);
  if (typeof text !== 'string' || !/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n)) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', { path: flag, expected: 'a whole number', received: show(text), fix: `Pass ${flag} 3.` });
  }
  return n;
}

/** A ms figure for people: `59m 59s`, `1.2s`, `0`. */
function ms(n: number): string {
  if (n <= 0) return '0';
  if (n < 1000) return `${n} ms`;
  const s = Math.ceil(n / 1000);
  const parts: string[] = [];
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d) parts.push(`${d}d`);
  if (h) parts.push(`${h}h`);
  if (m) parts.push(`${m}m`);
  if (s % 60 || parts.length === 0) parts.push(`${s % 60}s`);
  return parts.join(' ');
}

function stateLines(s: KeyState): string {
  const lines = [
    `rule        ${s.rule} (limit ${s.limit} per ${ms(s.windowMs)}${s.capacity !== s.limit ? `, capacity ${s.capacity}` : ''})`,
    `key         ${s.key}${s.storeKey !== s.key ? ` (stored as ${s.storeKey})` : ''}`,
    `state       ${s.exists ? 'stored' : 'none (a fresh key)'}`,
    `remaining   ${s.remaining} of ${s.capacity}`,
    `full in     ${ms(s.resetMs)}`,
    `admits in   ${s.retryAfterMs > 0 ? ms(s.retryAfterMs) : 'now'}`,
    `blocked     ${s.blocked ? `until ${new Date(s.blockedUntil as number).toISOString()} (${ms((s.blockedUntil as number) - s.at)})` : 'no'}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** Options only some operations take: given to another, they would be dropped without a word. */
const ONLY_FOR: Readonly<Record<string, readonly KeyOperationChoice[]>> = {
  for: ['block'],
  units: ['penalize', 'reward'],
};

/** Refuses an option that does not apply to `op` (`--units` to get) or to the other options (`--ipv6-subnet` with `--key`). */
function applicable(v: Values, op: KeyOperationChoice): void {
  for (const [flag, ops] of Object.entries(ONLY_FOR)) {
    if (v[flag] === undefined || ops.includes(op)) continue;
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: `--${flag}`,
      expected: `--${flag} only with ${ops.join(' or ')}`,
      received: `--${flag} with ${op}`,
      fix: `Leave --${flag} out of "tollgate keys ${op}", or run "tollgate keys ${ops[0]}".`,
    });
  }
  if (v['ipv6-subnet'] !== undefined && v.ip === undefined) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--ipv6-subnet',
      expected: '--ipv6-subnet only with --ip (it says how ip() keys an address)',
      received: '--ipv6-subnet without --ip',
      fix: 'Pass the address with --ip, or leave --ipv6-subnet out: --key is used as given.',
    });
  }
}

/** `--id`: the operation id of a change (block, unblock, penalize, reward). */
function opId(v: Values, op: KeyOperationChoice): string | undefined {
  const id = v.id;
  if (id === undefined) return undefined;
  if (op === 'get' || op === 'reset' || typeof id !== 'string' || id === '') {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--id',
      expected: 'an operation id, for block, unblock, penalize or reward',
      received: op === 'get' || op === 'reset' ? `--id with ${op}` : show(id),
      fix: 'Leave --id out, or pass the same id on every retry of one change, e.g. --id incident-7.',
    });
  }
  return id;
}

/** A failure of Redis itself (unreachable, an error reply, a timeout), told from a bad argument. */
function isStoreFailure(err: unknown): boolean {
  if (err instanceof TollgateError)
    return (
      err.code === 'TG_STORE_TIMEOUT' ||
      err.code === 'TG_STORE_UNCONFIRMED' ||
      err.code === 'TG_STORE_ERROR' ||
      err.code === 'TG_STORE_CLOSED'
    );
  return !(err instanceof Error && 'expected' in err);
}

/** Runs `tollgate keys <operation> ...`; returns the exit code. */
export async function keysCommand(operation: string | undefined, v: Values, io: KeysIo): Promise<number> {
  if (!(KEY_OPERATIONS as readonly string[]).includes(operation ?? '')) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: 'tollgate keys',
      expected: `an operation: ${KEY_OPERATIONS.join(', ')}`,
      received: show(operation),
      fix: 'For example "tollgate keys get --redis redis://localhost:6379 --rule ip --rate 100/min --key 203.0.113.7".',
    });
  }
  const op = operation as KeyOperationChoice;
  applicable(v, op);
  const urls = (v.redis as string[] | undefined) ?? [];
  if (urls.length === 0) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--redis',
      expected: 'the Redis URL the application uses (redis://[user:password@]host:port[/db], rediss:// for TLS)',
      received: 'nothing',
      fix: 'Pass --redis redis://localhost:6379 (with --cluster, one or more seed nodes).',
    });
  }
  if (urls.length > 1 && !v.cluster) {
    throw cliError('TG_CLI_INVALID_ARGUMENT', {
      path: '--redis',
      expected: 'one URL (several only with --cluster: its seed nodes)',
      received: `${urls.length} URLs`,
      fix: 'Pass --cluster for a Redis Cluster, or one --redis.',
    });
  }
  const name = required(v, 'rule', "the rule's name");
  const key = keyOf(v);
  const rule = await ruleOf(v, io, name);
  const units = op === 'penalize' || op === 'reward' ? whole(required(v, 'units', 'a number of units'), '--units') : undefined;
  const duration = op === 'block' ? required(v, 'for', 'how long to block, e.g. 1h') : undefined;
  const id = opId(v, op);
  const timeoutMs = v.timeout === undefined ? 2000 : whole(v.timeout, '--timeout');
  const storePrefix = (v.prefix as string | undefined) ?? '';
  const limiterPrefix = (v['limiter-prefix'] as string | undefined) ?? 'tg';
  const tag = v['hash-tag'] as string | undefined;

  // Loaded here: simulate and compare never need a Redis client.
  const { RedisStore } = await import('@tollgate/redis');
  const redis = await openRedis({ urls, cluster: v.cluster === true, timeoutMs });
  const { client } = redis;
  try {
    try {
      await redis.connect();
    } catch (err) {
      throw cliError(
        'TG_CLI_REDIS_FAILED',
        {
          path: '--redis',
          expected: 'a reachable Redis',
          received: (err as Error).message,
          fix: 'Check the URL, the network and the credentials.',
        },
        err,
      );
    }
    const store = new RedisStore({ client, prefix: storePrefix, timeoutMs, ...(tag !== undefined ? { hashTag: () => tag } : {}) });
    store.on('error', () => {});
    const limiter = createLimiter({ rules: [rule], store, prefix: limiterPrefix });
    let state: KeyState | undefined;
    try {
      const options = id === undefined ? undefined : { id };
      if (op === 'reset') await limiter.reset(name, key);
      else if (op === 'block') state = await limiter.block(name, key, duration as Duration, options);
      else if (op === 'penalize' || op === 'reward') state = await limiter[op](name, key, units as number, options);
      else if (op === 'unblock') state = await limiter.unblock(name, key, options);
      else state = await limiter.get(name, key);
      if (op === 'reset') state = await limiter.get(name, key);
    } catch (err) {
      if (isStoreFailure(err)) {
        const unconfirmed = (err as TollgateError).code === 'TG_STORE_UNCONFIRMED';
        throw cliError(
          'TG_CLI_REDIS_FAILED',
          {
            path: '--redis',
            expected: 'Redis to run the operation',
            received: (err as Error).message,
            fix: unconfirmed
              ? `It may have been applied: check with "tollgate keys get" before acting again${op === 'get' || op === 'reset' ? '' : ', or retry with the same --id (a change already applied with that id is not made twice)'}.`
              : 'Check that Redis is up, that its user may run the operation, and that --timeout is long enough.',
          },
          err,
        );
      }
      throw err;
    } finally {
      await store.close();
    }
    const s = state as KeyState;
    if (v.json)
      io.stdout(
        `${JSON.stringify({ command: 'keys', operation: op, redisKey: store.keyOf(limiter.rules[0]?.spec as never, s.storeKey, key), state: s })}\n`,
      );
    else io.stdout(`${op === 'get' ? '' : `${op}: done\n`}${stateLines(s)}`);
    return 0;
  } finally {
    redis.close();
  }
}
