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

export type Command = 'c' | 'p';

/** One stack to decide: consume or peek `ops` at `now` (undefined: Redis time). */
export interface StackCall {
  readonly cmd: Command;
  readonly ops: readonly StoreOp[];
  readonly now: number | undefined;
}

/** ARGV deciding `stacks` in one script run (mode `d`, see lua/stack.ts). */
export function decideArgs(stacks: readonly StackCall[], minTtl: string): (string | Buffer)[] {
  const out: (string | Buffer)[] = ['d', minTtl, String(stacks.length)];
  for (const st of stacks) {
    out.push(st.cmd, st.now === undefined ? '' : String(st.now), String(st.ops.length));
    for (const op of st.ops) out.push(ruleArg(op.rule), String(op.cost));
  }
  return out;
}

/** ARGV giving back what `ops` consumed at `at` (mode `r`). */
export function refundArgs(ops: readonly StoreOp[], now: number | undefined, at: number, minTtl: string): (string | Buffer)[] {
  const out: (string | Buffer)[] = ['r', minTtl, now === undefined ? '' : String(now), String(at)];
  for (const op of ops) out.push(ruleArg(op.rule), String(op.cost));
  return out;
}

/**
 * Parses a decide reply: per stack, allowed, now and OUT_FIELDS per op; numbers are
 * integer replies, or exact decimal text when fractional. `sizes[j]` is stack j's op count.
 */
export function parseDecisions(reply: unknown, sizes: readonly number[]): StoreDecision[] {
  const a = reply as (number | string)[];
  const out: StoreDecision[] = new Array(sizes.length);
  let k = 0;
  for (let j = 0; j < sizes.length; j++) {
    const n = sizes[j] as number;
    const outcomes: Outcome[] = new Array(n);
    const allowed = a[k] === 1;
    const now = Number(a[k + 1]);
    k += 2;
    for (let i = 0; i < n; i++) {
      outcomes[i] = {
        allowed: a[k] === 1,
        remaining: Number(a[k + 1]),
        resetMs: Number(a[k + 2]),
        retryAfterMs: Number(a[k + 3]),
        delayMs: Number(a[k + 4]),
        reason: REASONS[a[k + 5] as string],
      };
      k += OUT_FIELDS;
    }
    out[j] = { allowed, now, outcomes };
  }
  return out;
}
