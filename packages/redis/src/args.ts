/**
 * The script's wire format (see `lua/stack.ts`): a rule becomes one comma-separated ARGV
 * string, built once per `RuleSpec` and cached; per request only the cost is appended.
 * Few, short arguments keep both the client's encoding and the script's parsing cheap.
 */
import type { Outcome, RejectReason, RuleSpec, StoreDecision, StoreOp } from '@tollgate/core';
import { OUT_FIELDS } from './lua/index.js';

const ALGO_CODE = {
  'fixed-window': 'f',
  'sliding-log': 's',
  'sliding-window': 'w',
  'token-bucket': 't',
  'leaky-bucket': 'k',
} as const;

const REASONS: Record<string, RejectReason | undefined> = { '': undefined, l: 'limit', b: 'blocked', c: 'cost_exceeds_limit' };

const cache = new WeakMap<RuleSpec, string>();

/** The rule's fields, comma-separated and ending with a comma (the cost follows). */
export function ruleArg(r: RuleSpec): string {
  let a = cache.get(r);
  if (a === undefined) {
    a = `${[
      ALGO_CODE[r.algorithm],
      String(r.limit),
      String(r.windowMs),
      String(r.burst),
      String(r.queue),
      r.align === 'first-request' ? 'f' : 'c',
      r.mode === 'queue' ? 'q' : 'm',
      r.calendar === 'month' ? 'm' : r.calendar === 'day' ? 'd' : '',
      String(r.blockForMs),
      r.countRejected ? '1' : '0',
      r.dryRun ? '1' : '0',
      String(r.maxCost),
    ].join(',')},`;
    cache.set(r, a);
  }
  return a;
}

export type Command = 'c' | 'p' | 'r';

/** ARGV for `ops`: command, now ('' for Redis TIME), at, least TTL, then each op's rule and cost. */
export function scriptArgs(
  cmd: Command,
  ops: readonly StoreOp[],
  now: number | undefined,
  at: number | undefined,
  minTtl: string,
): string[] {
  const out: string[] = [cmd, now === undefined ? '' : String(now), at === undefined ? '' : String(at), minTtl];
  for (const op of ops) out.push(ruleArg(op.rule) + op.cost);
  return out;
}

/**
 * Parses a consume/peek reply: an array whose numbers are integer replies, or exact
 * decimal text when fractional.
 */
export function parseDecision(reply: unknown, n: number): StoreDecision {
  const a = reply as (number | string)[];
  const outcomes: Outcome[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const k = 2 + i * OUT_FIELDS;
    outcomes[i] = {
      allowed: a[k] === 1,
      remaining: Number(a[k + 1]),
      resetMs: Number(a[k + 2]),
      retryAfterMs: Number(a[k + 3]),
      delayMs: Number(a[k + 4]),
      reason: REASONS[a[k + 5] as string],
    };
  }
  return { allowed: a[0] === 1, now: Number(a[1]), outcomes };
}
