/**
 * The script's wire format (see `lua/stack.ts`), all text: ioredis writes a command whose
 * arguments are all strings as one string, while a single Buffer argument makes it copy
 * every argument separately. Each distinct rule of a call travels once (its 7 fields
 * built once per `RuleSpec` and cached); each stack is one shape field (`c1:1,2:1`: the
 * command, then per op its rule's number in the call and its cost), plus its `now` when
 * supplied. Numbers are `String(x)` (shortest text that reads back as the same double;
 * `-0` kept), which Lua's `tonumber` reads exactly.
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

/** A number as text that Lua's `tonumber` reads back as the same double. */
function num(x: number): string {
  return Object.is(x, -0) ? '-0' : String(x);
}

interface RuleWire {
  /** flags, L, W, B, Q, blockForMs, maxCost. */
  readonly fields: readonly string[];
  /** The call that last listed the rule, and its number there. */
  call: number;
  n: number;
}

const wires = new WeakMap<RuleSpec, RuleWire>();
/** Numbers the calls being built (synchronously, one at a time). */
let calls = 0;

function wireOf(r: RuleSpec): RuleWire {
  let w = wires.get(r);
  if (w === undefined) {
    const flags =
      ALGO_CODE[r.algorithm] +
      (r.align === 'first-request' ? 'f' : 'c') +
      (r.mode === 'queue' ? 'q' : 'm') +
      (r.calendar === 'month' ? 'm' : r.calendar === 'day' ? 'd' : '-') +
      (r.countRejected ? '1' : '0') +
      (r.dryRun ? '1' : '0');
    w = { fields: [flags, num(r.limit), num(r.windowMs), num(r.burst), num(r.queue), num(r.blockForMs), num(r.maxCost)], call: 0, n: 0 };
    wires.set(r, w);
  }
  return w;
}

/** What one call sends: its distinct keys and its arguments. */
export interface ScriptCall {
  readonly keys: string[];
  readonly args: string[];
}

/** Numbers the rules (and, when `seen` is given, the keys) of one call as its shapes list them. */
class CallBuilder {
  readonly call = ++calls;
  readonly args: string[];
  readonly keys: string[] = [];
  readonly #seen = new Map<string, number>();
  #rules = 0;

  constructor(mode: string, minTtl: string) {
    this.args = [mode, minTtl, ''];
  }

  /**
   * The shape of `ops` (keys `keys[from..]`): lists rules new to the call, and keys new to
   * it when `dedupe`; a key already listed is named by its index (`@i`).
   */
  shape(cmd: string, ops: readonly StoreOp[], keys: readonly string[], from: number, dedupe: boolean): string {
    let shape = cmd;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const w = wireOf(op.rule);
      if (w.call !== this.call) {
        w.call = this.call;
        w.n = ++this.#rules;
        for (const f of w.fields) this.args.push(f);
      }
      shape += `${i === 0 ? '' : ','}${w.n}:${num(op.cost)}`;
      const key = keys[from + i] as string;
      const at = dedupe ? this.#seen.get(key) : undefined;
      if (at !== undefined) shape += `@${at}`;
      else {
        this.keys.push(key);
        if (dedupe) this.#seen.set(key, this.keys.length);
      }
    }
    return shape;
  }

  finish(tail: readonly string[]): ScriptCall {
    this.args[2] = String(this.#rules);
    for (const f of tail) this.args.push(f);
    return { keys: this.keys, args: this.args };
  }
}

export type Command = 'c' | 'p';

/** One stack to decide: consume or peek `ops` at `now` (undefined: Redis time). */
export interface StackCall {
  readonly cmd: Command;
  readonly ops: readonly StoreOp[];
  readonly now: number | undefined;
}

/**
 * The call deciding `stacks` in one script run (mode `d`, see lua/stack.ts); `keys` are
 * the ops' Redis keys in order, stack after stack. Each distinct key is sent once.
 */
export function decideArgs(stacks: readonly StackCall[], keys: readonly string[], minTtl: string): ScriptCall {
  const b = new CallBuilder('d', minTtl);
  const tail: string[] = [];
  let from = 0;
  for (const st of stacks) {
    if (st.now === undefined) tail.push(b.shape(st.cmd, st.ops, keys, from, true));
    else tail.push(b.shape(st.cmd === 'c' ? 'C' : 'P', st.ops, keys, from, true), num(st.now));
    from += st.ops.length;
  }
  return b.finish(tail);
}

/** The call giving back what `ops` (under `keys`) consumed at `at` (mode `r`). */
export function refundArgs(
  ops: readonly StoreOp[],
  keys: readonly string[],
  now: number | undefined,
  at: number,
  minTtl: string,
): ScriptCall {
  const b = new CallBuilder('r', minTtl);
  const shape = b.shape('r', ops, keys, 0, false);
  return b.finish([now === undefined ? '' : num(now), num(at), shape]);
}

/**
 * Parses a decide reply: per stack, allowed, now and OUT_FIELDS per op (see lua/index.ts); numbers are
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
      const code = a[k];
      const last = Number(a[k + 3]);
      outcomes[i] =
        code === 1
          ? { allowed: true, remaining: Number(a[k + 1]), resetMs: Number(a[k + 2]), retryAfterMs: 0, delayMs: last, reason: undefined }
          : {
              allowed: false,
              remaining: Number(a[k + 1]),
              resetMs: Number(a[k + 2]),
              retryAfterMs: last,
              delayMs: 0,
              reason: REASONS[code as string],
            };
      k += OUT_FIELDS;
    }
    out[j] = { allowed, now, outcomes };
  }
  return out;
}
