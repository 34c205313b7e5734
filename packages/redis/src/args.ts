/**
 * The script's wire format (see `lua/parse.lua`), all text: ioredis writes a command whose
 * arguments are all strings as one string, while a single Buffer argument makes it copy
 * every argument separately. Each distinct rule of a call travels once, as one field (its
 * 7 values, built once per `RuleSpec` and cached; Redis pays per argument, and the server
 * keeps the rule it parsed from that text); stacks travel as runs: a count and a shape
 * (`c1:1,2:1`: the command, then per op its rule's number in the call and its cost), plus
 * the run's `now` when supplied. Numbers are `String(x)` (shortest text that reads back as
 * the same double; `-0` kept), which Lua's `tonumber` reads exactly. The decide reply is
 * one string of packed doubles, read here from the Buffer ioredis returns.
 */
import { randomBytes } from 'node:crypto';
import {
  type KeyOp,
  OPERATION_ID_TTL_MS,
  type Outcome,
  type RejectReason,
  type RuleSpec,
  registry,
  type StoreDecision,
  type StoreKeyState,
  type StoreOp,
} from '@tollgate/core';
import { OUT_FIELDS } from './lua/index.js';

/** A number as text that Lua's `tonumber` reads back as the same double. */
function num(x: number): string {
  return Object.is(x, -0) ? '-0' : String(x);
}

interface RuleWire {
  /** flags, L, W, B, Q, blockForMs, maxCost, separated by spaces. */
  readonly text: string;
  /** The call that last listed the rule, and its number there. */
  call: number;
  n: number;
  /**
   * The plans of a call deciding one op of cost 1 of this rule alone on Redis time (the
   * common call: a request alone in its tick, one rule), consume and peek, for the least
   * TTL `oneTtl`; built on first use.
   */
  oneC: string | undefined;
  oneP: string | undefined;
  oneTtl: string | undefined;
  /** The plan of the last stack of several ops, on Redis time, that started with this rule. */
  stack: StackPlan | undefined;
}

/**
 * The plan of one stack of several ops on Redis time with distinct keys (a request alone in
 * its tick with a stack of rules): it depends on the command, the least TTL and each op's
 * rule and cost, not on the keys, so the same rules at the same costs send the same text.
 */
interface StackPlan {
  readonly cmd: Command;
  readonly minTtl: string;
  readonly rules: readonly RuleSpec[];
  readonly costs: readonly number[];
  readonly plan: string;
}

/**
 * How long a give-back's mark lives in Redis, in ms: longer than a client takes to re-send
 * a call it had no reply to (ioredis after a reconnect; see docs/decisions.md, "A give-back
 * is applied once").
 */
export const GIVE_BACK_MARK_MS = 60_000;
const MARK_TTL = String(GIVE_BACK_MARK_MS);
/** This process's part of every give-back id (random: two instances' ids never meet). */
const PROCESS_ID = randomBytes(9).toString('base64url');
/** Numbers the give-back calls built by this process. */
let giveBacks = 0;

/** Longest stack whose plan is kept (its keys are compared pairwise). */
const STACK_PLAN_MAX = 8;

const wires = new WeakMap<RuleSpec, RuleWire>();
/** Numbers the calls being built (synchronously, one at a time). */
let calls = 0;

function wireOf(r: RuleSpec): RuleWire {
  let w = wires.get(r);
  if (w === undefined) {
    const def = registry[r.algorithm];
    const flags =
      def.code +
      (r.align === 'first-request' ? 'f' : 'c') +
      (r.mode === 'queue' ? 'q' : 'm') +
      (r.calendar === 'month' ? 'm' : r.calendar === 'day' ? 'd' : '-') +
      (r.countRejected ? '1' : '0') +
      (r.dryRun ? '1' : '0');
    const fields = [flags, num(r.limit), num(r.windowMs), num(r.burst), num(def.wireQ(r)), num(r.blockForMs), num(r.maxCost)];
    w = { text: fields.join(' '), call: 0, n: 0, oneC: undefined, oneP: undefined, oneTtl: undefined, stack: undefined };
    wires.set(r, w);
  }
  return w;
}

/** A rule's 7 fields as a plan lists them (for the operations by key, lua/keyops.lua). */
export function ruleText(r: RuleSpec): string {
  return wireOf(r).text;
}

/** What one call sends: its distinct keys and its arguments (the plan, then the times it names). */
export interface ScriptCall {
  readonly keys: string[];
  readonly args: string[];
}

/** Numbers the rules (and, when `seen` is given, the keys) of one call as its shapes list them. */
class CallBuilder {
  readonly call = ++calls;
  /** The plan's lines: its header (written by finish), the rules, then the tail. */
  readonly lines: string[];
  readonly keys: string[] = [];
  readonly #seen = new Map<string, number>();
  readonly #head: string;
  #rules = 0;

  constructor(mode: string, minTtl: string) {
    this.lines = [''];
    this.#head = `${mode} ${minTtl} `;
  }

  /**
   * The shape of `ops` (keys `keys[from..]`): lists rules new to the call, and keys new to
   * it when `dedupe`; a key already listed is named by its index (`@i`).
   */
  shape(cmd: string, ops: readonly StoreOp[], keys: readonly string[], from: number, dedupe: boolean): string {
    const refs: number[] = [];
    this.list(ops, keys, from, dedupe, refs);
    return this.text(cmd, ops, refs);
  }

  /**
   * Lists the rules of `ops` new to the call, and their keys new to it (all when not
   * `dedupe`); `refs[i]` gets the index of op i's key when it was listed before, else 0.
   */
  list(ops: readonly StoreOp[], keys: readonly string[], from: number, dedupe: boolean, refs: number[]): void {
    for (let i = 0; i < ops.length; i++) {
      const w = wireOf((ops[i] as StoreOp).rule);
      if (w.call !== this.call) {
        w.call = this.call;
        w.n = ++this.#rules;
        this.lines.push(w.text);
      }
      const key = keys[from + i] as string;
      const at = dedupe ? this.#seen.get(key) : undefined;
      if (at !== undefined) refs[i] = at;
      else {
        refs[i] = 0;
        this.keys.push(key);
        if (dedupe) this.#seen.set(key, this.keys.length);
      }
    }
  }

  /** The shape text of `ops` with the key references `refs` (see list). */
  text(cmd: string, ops: readonly StoreOp[], refs: readonly number[]): string {
    let shape = cmd;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      shape += `${i === 0 ? '' : ','}${wireOf(op.rule).n}:${num(op.cost)}`;
      const at = refs[i] as number;
      if (at !== 0) shape += `@${at}`;
    }
    return shape;
  }

  /**
   * The call: the plan (header, rules, `tail`'s lines) and then `times`. A call that gives
   * back (`giveBack`) also carries its mark, a key of its own in the first key's slot (its
   * hash tag; no key of ours has a space), last of the keys, and the mark's lifetime, last
   * of the arguments: Redis applies the call's give-backs only if it sets the mark.
   */
  finish(tail: readonly string[], times: readonly string[], giveBack = false): ScriptCall {
    this.lines[0] = this.#head + String(this.#rules);
    for (const f of tail) this.lines.push(f);
    if (!giveBack) return { keys: this.keys, args: [this.lines.join('\n'), ...times] };
    this.keys.push(`${this.keys[0] as string} gb ${PROCESS_ID}.${(++giveBacks).toString(36)}`);
    return { keys: this.keys, args: [this.lines.join('\n'), ...times, MARK_TTL] };
  }
}

export type Command = 'c' | 'p';

/**
 * One stack of a batched call: consume or peek `ops` at `now` (undefined: Redis time), or
 * (`s`) settle them as decided at `at`, each op's cost the actual cost less the estimate.
 */
export interface StackCall {
  readonly cmd: Command | 's';
  readonly ops: readonly StoreOp[];
  readonly now: number | undefined;
  readonly at?: number;
}

/**
 * The call deciding `stacks` in one script run (mode `d`, see lua/parse.lua); `keys` are
 * the ops' Redis keys in order, stack after stack. Each distinct key is sent once.
 */
export function decideArgs(stacks: readonly StackCall[], keys: readonly string[], minTtl: string): ScriptCall {
  const lone = stacks.length === 1 ? (stacks[0] as StackCall) : undefined;
  if (lone !== undefined && lone.cmd !== 's') {
    const st = lone as StackCall & { cmd: Command };
    const op = st.ops[0] as StoreOp;
    // One op of cost 1 on Redis time: its plan is the rule's, kept with its wire text.
    if (st.ops.length === 1 && st.now === undefined && op.cost === 1)
      return { keys: keys as string[], args: [onePlan(op.rule, st.cmd, minTtl)] };
    // Several ops on Redis time, each with its own key: the plan the same rules and costs had.
    if (op !== undefined && st.now === undefined && st.ops.length <= STACK_PLAN_MAX && distinct(keys)) {
      const w = wireOf(op.rule);
      const kept = w.stack;
      if (kept !== undefined && sameStack(kept, st, minTtl)) return { keys: keys as string[], args: [kept.plan] };
      const call = build(stacks, keys, minTtl);
      w.stack = { cmd: st.cmd, minTtl, rules: st.ops.map((o) => o.rule), costs: st.ops.map((o) => o.cost), plan: call.args[0] as string };
      return call;
    }
  }
  return build(stacks, keys, minTtl);
}

/** Whether every key of a stack is its own (no op names a key listed before it). */
function distinct(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) for (let j = 0; j < i; j++) if (keys[i] === keys[j]) return false;
  return true;
}

/** Whether `kept` is the plan of stack `st` (same command, least TTL, rules and costs). */
function sameStack(kept: StackPlan, st: StackCall, minTtl: string): boolean {
  const ops = st.ops;
  if (kept.cmd !== st.cmd || kept.minTtl !== minTtl || kept.rules.length !== ops.length) return false;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i] as StoreOp;
    if (kept.rules[i] !== op.rule || !Object.is(kept.costs[i], op.cost)) return false;
  }
  return true;
}

/** The general builder of decideArgs: any stacks, runs of like stacks, supplied times. */
function build(stacks: readonly StackCall[], keys: readonly string[], minTtl: string): ScriptCall {
  const b = new CallBuilder('d', minTtl);
  // One line per run (`<count> <shape>`), and the supplied times of the runs with one.
  const tail: string[] = [];
  const times: string[] = [];
  let from = 0;
  // The run being built: its line's index in tail, its shape, first stack and key
  // references. A stack joins it when it has the same command, time, rules, costs and
  // references; its shape text is built only when it starts a run.
  let runAt = -1;
  let shape = '';
  let count = 0;
  let last: StackCall | undefined;
  let lastRefs: number[] = [];
  let refs: number[] = [];
  let settles = false;
  for (const st of stacks) {
    const ops = st.ops;
    b.list(ops, keys, from, true, refs);
    from += ops.length;
    if (last !== undefined && sameRun(last, lastRefs, st, refs)) {
      count++;
      continue;
    }
    if (runAt >= 0) tail[runAt] = `${count} ${shape}`;
    runAt = tail.length;
    count = 1;
    shape = b.text(st.now === undefined ? st.cmd : st.cmd.toUpperCase(), ops, refs);
    tail.push('');
    if (st.now !== undefined) times.push(num(st.now));
    if (st.cmd === 's') {
      times.push(num(st.at as number));
      settles = true;
    }
    last = st;
    // The run keeps its references; the next stack's are listed into the other array.
    [lastRefs, refs] = [refs, lastRefs];
  }
  if (runAt >= 0) tail[runAt] = `${count} ${shape}`;
  return b.finish(tail, times, settles);
}

/** The plan of one op of cost 1 of `rule` on Redis time (what decideArgs would build). */
function onePlan(rule: RuleSpec, cmd: Command, minTtl: string): string {
  const w = wireOf(rule);
  if (w.oneTtl !== minTtl) {
    w.oneTtl = minTtl;
    w.oneC = undefined;
    w.oneP = undefined;
  }
  if (cmd === 'c') {
    w.oneC ??= `d ${minTtl} 1\n${w.text}\n1 c1:1`;
    return w.oneC;
  }
  w.oneP ??= `d ${minTtl} 1\n${w.text}\n1 p1:1`;
  return w.oneP;
}

/** Whether stack `b` (key references `br`) has the shape of stack `a` (references `ar`). */
function sameRun(a: StackCall, ar: readonly number[], b: StackCall, br: readonly number[]): boolean {
  // A settle is a run of its own (its `at` is the run's).
  if (a.cmd !== b.cmd || a.cmd === 's' || !Object.is(a.now, b.now) || a.ops.length !== b.ops.length) return false;
  for (let i = 0; i < a.ops.length; i++) {
    const x = a.ops[i] as StoreOp;
    const y = b.ops[i] as StoreOp;
    if (x.rule !== y.rule || !Object.is(x.cost, y.cost) || ar[i] !== br[i]) return false;
  }
  return true;
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
  return b.finish([shape], [now === undefined ? '' : num(now), num(at)], true);
}

/** A settle's call (see `s` in lua/parse.lua): each op's cost is the actual cost less the estimate. */
export function settleArgs(
  ops: readonly StoreOp[],
  keys: readonly string[],
  now: number | undefined,
  at: number,
  minTtl: string,
): ScriptCall {
  const b = new CallBuilder('s', minTtl);
  const shape = b.shape('s', ops, keys, 0, false);
  return b.finish([shape], [now === undefined ? '' : num(now), num(at)], true);
}

/** One lease request of a lease call: a stack at the request's costs, its time, the most units one lease may take. */
export interface LeaseRequest {
  readonly ops: readonly StoreOp[];
  /** Supplied time, or undefined for Redis time. */
  readonly now: number | undefined;
  readonly most: number;
}

/**
 * A lease call (mode `l`, see lua/lease.lua): the lease requests of one tick (no key in two
 * of them), `keys` their ops' Redis keys in order, with the share of what is left one lease
 * may take.
 */
export function leaseArgs(requests: readonly LeaseRequest[], keys: readonly string[], share: number, minTtl: string): ScriptCall {
  const b = new CallBuilder('l', minTtl);
  const lines: string[] = new Array(requests.length);
  const times: string[] = [num(share)];
  let from = 0;
  for (let j = 0; j < requests.length; j++) {
    const q = requests[j] as LeaseRequest;
    lines[j] = `1 ${b.shape(q.now === undefined ? 'c' : 'C', q.ops, keys, from, false)}`;
    from += q.ops.length;
    times.push(q.now === undefined ? '' : num(q.now), num(q.most));
  }
  return b.finish(lines, times);
}

/** What a lease call answers per request: its decision, and each op's grant (the units it consumed if admitted). */
export interface LeaseAnswer {
  readonly d: StoreDecision;
  readonly grants: number[];
}

/** A lease call's reply: each request's decision, then every op's grant. `sizes[j]`: request j's op count. */
export function parseLease(reply: unknown, sizes: readonly number[]): LeaseAnswer[] {
  let n = 0;
  for (const s of sizes) n += s;
  if (!Buffer.isBuffer(reply) || reply.length < 8 * n) throw new TypeError('The store script replied no lease grants');
  const at = reply.length - 8 * n;
  const ds = parseDecisions(reply.subarray(0, at), sizes);
  const out: LeaseAnswer[] = new Array(sizes.length);
  let g = at;
  for (let j = 0; j < sizes.length; j++) {
    const grants: number[] = new Array(sizes[j] as number);
    for (let i = 0; i < grants.length; i++, g += 8) grants[i] = reply.readDoubleLE(g);
    out[j] = { d: ds[j] as StoreDecision, grants };
  }
  return out;
}

/**
 * The arguments of an operation by key (see lua/keyops.lua): rule, operation, time, least
 * TTL, the operation id ('' for none) and how long the id is remembered.
 */
export function keyOpArgs(r: RuleSpec, op: KeyOp, now: number | undefined, minTtl: string): string[] {
  const code =
    op.kind === 'get'
      ? 'g'
      : op.kind === 'unblock'
        ? 'u'
        : op.kind === 'block'
          ? `b ${num(op.ms)}`
          : `${op.kind === 'penalize' ? 'p' : 'w'} ${num(op.units)}`;
  const id = op.kind === 'get' || op.id === undefined ? '' : op.id;
  return [ruleText(r), code, now === undefined ? '' : num(now), minTtl, id, num(OPERATION_ID_TTL_MS)];
}

/** Parses an operation's reply: 6 little-endian doubles (see lua/keyops.lua). */
export function parseKeyState(reply: unknown): StoreKeyState {
  if (!Buffer.isBuffer(reply) || reply.length !== 48) {
    throw new TypeError(
      `The keys function replied ${Buffer.isBuffer(reply) ? `${reply.length} bytes` : typeof reply}, not its 6 packed figures`,
    );
  }
  return {
    now: reply.readDoubleLE(0),
    exists: reply.readDoubleLE(8) === 1,
    remaining: reply.readDoubleLE(16),
    resetMs: reply.readDoubleLE(24),
    retryAfterMs: reply.readDoubleLE(32),
    blockedUntil: reply.readDoubleLE(40),
  };
}

const REASON_OF: readonly (RejectReason | undefined)[] = [undefined, undefined, 'limit', 'blocked', 'cost_exceeds_limit'];

/**
 * Parses a decide reply: little-endian doubles, per stack allowed (1/0) and now, then
 * OUT_FIELDS per op (see lua/index.ts); or, when every stack was admitted straight through
 * (lua/one.lua), now and then per op remaining and resetMs (a length the general reply
 * never has: 8 more than a multiple of 16). `sizes[j]` is stack j's op count.
 */
export function parseDecisions(reply: unknown, sizes: readonly number[]): StoreDecision[] {
  if (!Buffer.isBuffer(reply)) throw new TypeError(`The store script replied ${typeof reply}, not its packed decisions`);
  if (reply.length % 16 === 8) return parseAdmitted(reply, sizes);
  const out: StoreDecision[] = new Array(sizes.length);
  let p = 0;
  for (let j = 0; j < sizes.length; j++) {
    const n = sizes[j] as number;
    const outcomes: Outcome[] = new Array(n);
    const allowed = reply.readDoubleLE(p) === 1;
    const now = reply.readDoubleLE(p + 8);
    p += 16;
    for (let i = 0; i < n; i++) {
      const code = reply.readDoubleLE(p);
      const last = reply.readDoubleLE(p + 24);
      outcomes[i] =
        code === 1
          ? {
              allowed: true,
              remaining: reply.readDoubleLE(p + 8),
              resetMs: reply.readDoubleLE(p + 16),
              retryAfterMs: 0,
              delayMs: last,
              reason: undefined,
            }
          : {
              allowed: false,
              remaining: reply.readDoubleLE(p + 8),
              resetMs: reply.readDoubleLE(p + 16),
              retryAfterMs: last,
              delayMs: 0,
              reason: REASON_OF[code],
            };
      p += OUT_FIELDS * 8;
    }
    out[j] = { allowed, now, outcomes };
  }
  if (p !== reply.length) throw new TypeError(`The store script replied ${reply.length} bytes for ${p} expected`);
  return out;
}

/** A reply of stacks all admitted straight through (see parseDecisions). */
function parseAdmitted(reply: Buffer, sizes: readonly number[]): StoreDecision[] {
  const now = reply.readDoubleLE(0);
  const out: StoreDecision[] = new Array(sizes.length);
  let p = 8;
  for (let j = 0; j < sizes.length; j++) {
    const n = sizes[j] as number;
    const outcomes: Outcome[] = new Array(n);
    for (let i = 0; i < n; i++) {
      outcomes[i] = {
        allowed: true,
        remaining: reply.readDoubleLE(p),
        resetMs: reply.readDoubleLE(p + 8),
        retryAfterMs: 0,
        delayMs: 0,
        reason: undefined,
      };
      p += 16;
    }
    out[j] = { allowed: true, now, outcomes };
  }
  if (p !== reply.length) throw new TypeError(`The store script replied ${reply.length} bytes for ${p} expected`);
  return out;
}
