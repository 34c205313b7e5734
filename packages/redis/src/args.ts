/**
 * The script's wire format (see `lua/stack.ts`): a rule becomes one binary ARGV packed
 * as `RULE_FORMAT`, built once per `RuleSpec` and cached; the cost follows as text. The
 * script reads a rule with one `struct.unpack` instead of parsing text.
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

const cache = new WeakMap<RuleSpec, Buffer>();

/** The rule packed as `RULE_FORMAT` (one char per code, a double per number), cached. */
export function ruleArg(r: RuleSpec): Buffer {
  let b = cache.get(r);
  if (b === undefined) {
    const buf = Buffer.alloc(54);
    let o = 0;
    const char = (c: string) => {
      buf.write(c, o, 'latin1');
      o += 1;
    };
    const num = (x: number) => {
      o = buf.writeDoubleLE(x, o);
    };
    char(ALGO_CODE[r.algorithm]);
    num(r.limit);
    num(r.windowMs);
    num(r.burst);
    num(r.queue);
    char(r.align === 'first-request' ? 'f' : 'c');
    char(r.mode === 'queue' ? 'q' : 'm');
    char(r.calendar === 'month' ? 'm' : r.calendar === 'day' ? 'd' : '-');
    num(r.blockForMs);
    char(r.countRejected ? '1' : '0');
    char(r.dryRun ? '1' : '0');
    num(r.maxCost);
    b = buf;
    cache.set(r, b);
  }
  return b;
}

export type Command = 'c' | 'p' | 'r';

/** ARGV for `ops`: command, now ('' for Redis TIME), at, least TTL, then each op's rule and cost. */
export function scriptArgs(
  cmd: Command,
  ops: readonly StoreOp[],
  now: number | undefined,
  at: number | undefined,
  minTtl: string,
): (string | Buffer)[] {
  const out: (string | Buffer)[] = [cmd, now === undefined ? '' : String(now), at === undefined ? '' : String(at), minTtl];
  for (const op of ops) out.push(ruleArg(op.rule), String(op.cost));
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
