/**
 * The differential test's programs: seeded random sequences of decisions, refunds,
 * reservations, operations by key, rule updates and clock steps, run on two limiters side
 * by side (one per store, the same rules, one ManualClock). Every answer of one limiter
 * must equal the other's: decisions field by field, key states, errors by code.
 *
 *   const program = makeProgram(seed);
 *   const mismatch = await runProgram(program, makeStores);
 *
 * A mismatch names the step; `shrink` removes steps while the mismatch stays, so a report
 * prints the seed and the shortest program found.
 */
import {
  type AlgorithmName,
  createLimiter,
  type Decision,
  type Limiter,
  ManualClock,
  type Reservation,
  type Rule,
  type Store,
} from '@tollgate/core';
import { prng } from './store-contract.js';

/** What the programs' rules read from a request. */
export interface Req {
  /** The key of the per-key rules. */
  k: string;
  /** A user key; undefined skips the per-user rules. */
  u?: string;
  /** The tier (with tiers). */
  t?: string;
  /** The cost read by rules with a cost function. */
  n?: number;
  /** The limit read by rules whose limit is a value of the request (the caller's plan). */
  L?: number;
}

type RuleConfig = Omit<Rule<Req>, 'key'> & {
  keyBy: 'k' | 'u' | 'all';
  /** With a limit read from the request: the limit when the request gives none. */
  plan?: number;
};

export type Step =
  | { op: 'consume' | 'peek'; req: Req; cost?: number }
  | { op: 'reserve'; req: Req; cost: number }
  | { op: 'flood'; req: Req; count: number }
  | { op: 'refund'; of: number; rules?: string[] }
  | { op: 'settle'; of: number; actual: number }
  | { op: 'cancel'; of: number }
  | { op: 'get' | 'unblock' | 'reset'; rule: string; key: string; id?: string; limit?: number }
  | { op: 'block'; rule: string; key: string; ms: number; id?: string; limit?: number }
  | { op: 'penalize' | 'reward'; rule: string; key: string; units: number; id?: string; limit?: number }
  | { op: 'resetReq'; req: Req }
  | { op: 'update'; rule: string; changes: { limit?: number; burst?: number; cost?: number; blockFor?: number } }
  | { op: 'clock'; ms: number };

export interface Program {
  seed: number;
  start: number;
  rules: RuleConfig[];
  tiers: Record<string, RuleConfig[]> | undefined;
  steps: Step[];
}

/** Every algorithm configuration the programs draw their rules from. */
export const ALGORITHMS: readonly { algorithm: AlgorithmName; extra?: Partial<Rule<Req>> }[] = [
  { algorithm: 'fixed-window' },
  { algorithm: 'fixed-window', extra: { align: 'first-request' } },
  { algorithm: 'sliding-log' },
  { algorithm: 'sliding-window' },
  { algorithm: 'token-bucket' },
  { algorithm: 'leaky-bucket' },
  { algorithm: 'leaky-bucket', extra: { mode: 'queue' } },
  { algorithm: 'sliding-buckets' },
  { algorithm: 'sliding-buckets', extra: { buckets: 3 } },
];

const WINDOWS = [1000, 999, 3000, 10_000, 60_000];
const KEYS = ['a', 'b', 'c'];

class Gen {
  readonly #r: () => number;
  constructor(seed: number) {
    this.#r = prng(seed);
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.#r() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.#r() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.#r() * xs.length)] as T;
  }
}

function makeRule(g: Gen, name: string, algo: (typeof ALGORITHMS)[number], lowerBurst: boolean): RuleConfig {
  const limit = g.int(1, 8);
  const burst = g.int(1, 10);
  const rule: RuleConfig = {
    name,
    keyBy: g.chance(0.7) ? 'k' : g.chance(0.5) ? 'all' : 'u',
    algorithm: algo.algorithm,
    limit,
    // sliding-buckets: blocks of whole ms (10 by default).
    window: g.pick(WINDOWS.filter((w) => algo.algorithm !== 'sliding-buckets' || w % ((algo.extra?.buckets as number) ?? 10) === 0)),
    ...algo.extra,
  };
  if ((algo.algorithm === 'token-bucket' || (algo.algorithm === 'leaky-bucket' && algo.extra?.mode !== 'queue')) && g.chance(0.4))
    rule.burst = burst;
  if (algo.extra?.mode === 'queue' && g.chance(0.4)) rule.queue = g.int(1, 6);
  if (g.chance(0.3)) rule.cost = (req: Req) => req.n ?? 1;
  else if (g.chance(0.2))
    rule.cost = g.int(1, Math.min(3, limit, rule.burst === undefined ? limit : burst, (rule.queue as number | undefined) ?? limit));
  if (g.chance(0.25)) rule.blockFor = g.pick([500, 2000, 30_000]);
  if (g.chance(0.25) && algo.extra?.mode !== 'queue') rule.countRejected = true;
  if (g.chance(0.08)) rule.dryRun = true;
  // A limit that is a value of the request, where the rule allows one (a leaky bucket's
  // burst and queue must follow it), and for a token bucket where its burst may fall.
  const ownTolerance = algo.algorithm === 'leaky-bucket' && (rule.burst !== undefined || rule.queue !== undefined);
  const fixedBurst = !lowerBurst && algo.algorithm === 'token-bucket';
  if (g.chance(0.12) && !ownTolerance && !fixedBurst && typeof rule.cost !== 'number') {
    rule.plan = limit;
    rule.limit = (req: Req) => req.L ?? limit;
  }
  return rule;
}

function stackOf(g: Gen, prefix: string, size: number, lowerBurst: boolean): RuleConfig[] {
  const rules = Array.from({ length: size }, (_, i) => makeRule(g, `${prefix}${i}`, g.pick(ALGORITHMS), lowerBurst));
  // Sometimes a second rule counting in the first one's group (same algorithm and numbers).
  const first = rules[0];
  if (first !== undefined && size < 4 && g.chance(0.12)) {
    first.group = `g${prefix}`;
    // Named after the first with a `g`: a Cluster hash tag by rule can put both in one slot.
    rules.push({ ...first, name: `${first.name}g`, keyBy: g.pick(['k', 'u', 'all'] as const) });
  }
  return rules;
}

export interface ProgramOptions {
  /** Steps in the program. @default 40 */
  length?: number;
  /** Whether the clock may step back. @default true */
  backward?: boolean;
  /**
   * Whether a token bucket's burst may fall (by `update`, or per request with its limit).
   * Not on a Cluster: a refused stack refunds the slots that admitted it, and a bucket
   * reserved under a lower burst was clamped to it, which the refund cannot undo (docs/decisions.md).
   * @default true
   */
  lowerBurst?: boolean;
}

/** The program of `seed`: a stack (and sometimes tiers), then `length` steps. */
export function makeProgram(seed: number, { length = 40, backward = true, lowerBurst = true }: ProgramOptions = {}): Program {
  const g = new Gen(seed);
  // Whole hours, then a random offset: windows start anywhere in a program.
  const start = Date.UTC(2026, 0, 1, g.int(0, 23)) + g.pick([0, 0, g.int(0, 999), g.int(0, 60_000)]);
  const tiered = g.chance(0.25);
  const rules = stackOf(g, 'r', g.int(tiered ? 0 : 1, tiered ? 2 : 4), lowerBurst);
  const tiers = tiered ? { free: stackOf(g, 'f', g.int(1, 2), lowerBurst), pro: stackOf(g, 'p', g.int(1, 2), lowerBurst) } : undefined;
  const all = [...rules, ...(tiers ? [...tiers.free, ...tiers.pro] : [])];
  const req = (): Req => {
    const r: Req = { k: g.pick(KEYS) };
    if (g.chance(0.7)) r.u = g.pick(['x', 'y']);
    if (tiers) r.t = g.chance(0.5) ? 'free' : 'pro';
    if (g.chance(0.5)) r.n = g.int(0, 4);
    if (g.chance(0.5)) r.L = g.int(1, 10);
    return r;
  };
  const decisions: number[] = [];
  const reservations: number[] = [];
  const steps: Step[] = [];
  // An operation id, sometimes: repeats of one id apply once.
  const id = () => (g.chance(0.3) ? { id: `id${g.int(1, 3)}` } : {});
  // The values of an operation on a rule whose limit is a value of the request.
  const values = (rule: RuleConfig) => (rule.plan !== undefined && g.chance(0.7) ? { limit: g.int(1, 10) } : {});
  const keyOf = (rule: RuleConfig) => (rule.keyBy === 'all' ? 'all' : rule.keyBy === 'u' ? g.pick(['x', 'y']) : g.pick(KEYS));
  // Each token bucket's largest burst so far (its limit or burst, whichever it follows): kept
  // as a floor when its burst may not fall.
  const tbNow = new Map(
    all
      .filter((r) => r.algorithm === 'token-bucket')
      .map((r) => [r.name, lowerBurst ? 0 : Math.max(r.limit as number, (r.burst as number | undefined) ?? 0)]),
  );
  // A burst of one key, or ordinary traffic: each program leans one way.
  const flooding = g.chance(0.3);
  for (let i = 0; i < length; i++) {
    const x = g.int(0, 99);
    const rule = g.pick(all);
    if (x < 30) {
      steps.push(g.chance(0.3) ? { op: 'consume', req: req(), cost: g.int(0, 5) } : { op: 'consume', req: req() });
      decisions.push(steps.length - 1);
    } else if (x < 36) steps.push({ op: 'peek', req: req(), ...(g.chance(0.3) ? { cost: g.int(0, 5) } : {}) });
    else if (x < 42 || (flooding && x < 50)) steps.push({ op: 'flood', req: req(), count: g.int(2, 12) });
    else if (x < 47 && decisions.length > 0) {
      const of = g.pick(decisions);
      steps.push(g.chance(0.5) ? { op: 'refund', of } : { op: 'refund', of, rules: [g.pick(all).name] });
    } else if (x < 52) {
      steps.push({ op: 'reserve', req: req(), cost: g.int(1, 4) });
      reservations.push(steps.length - 1);
    } else if (x < 57 && reservations.length > 0) {
      const of = g.pick(reservations);
      steps.push(g.chance(0.7) ? { op: 'settle', of, actual: g.int(0, 8) } : { op: 'cancel', of });
    } else if (x < 62) steps.push({ op: 'get', rule: rule.name, key: keyOf(rule), ...values(rule) });
    else if (x < 65)
      steps.push({ op: 'block', rule: rule.name, key: keyOf(rule), ms: g.pick([1, 700, 5000, 120_000]), ...id(), ...values(rule) });
    else if (x < 67) steps.push({ op: 'unblock', rule: rule.name, key: keyOf(rule), ...id(), ...values(rule) });
    else if (x < 71) steps.push({ op: 'penalize', rule: rule.name, key: keyOf(rule), units: g.int(1, 6), ...id(), ...values(rule) });
    else if (x < 75) steps.push({ op: 'reward', rule: rule.name, key: keyOf(rule), units: g.int(1, 6), ...id(), ...values(rule) });
    else if (x < 77) steps.push(g.chance(0.5) ? { op: 'reset', rule: rule.name, key: keyOf(rule) } : { op: 'resetReq', req: req() });
    else if (x < 80) {
      const changes: { limit?: number; burst?: number; cost?: number; blockFor?: number } = {};
      const c = g.int(0, 3);
      const tb = rule.algorithm === 'token-bucket';
      const floor = tbNow.get(rule.name) ?? 0;
      if (c === 0) changes.limit = Math.max(floor, g.int(1, 10));
      else if (c === 1 && (tb || rule.algorithm === 'leaky-bucket')) changes.burst = Math.max(floor, g.int(1, 10));
      else if (c === 2) changes.cost = g.int(1, 3);
      else changes.blockFor = g.pick([300, 4000]);
      // A group's rules count alike (docs/decisions.md): an update changes them all.
      for (const m of all) {
        if (m !== rule && (rule.group === undefined || m.group !== rule.group)) continue;
        steps.push({ op: 'update', rule: m.name, changes });
        if (tb && !lowerBurst) tbNow.set(m.name, Math.max(floor, changes.limit ?? 0, changes.burst ?? 0));
      }
    } else {
      // Small steps mostly; sometimes back in time, or hours and days ahead.
      const y = g.int(0, 99);
      const ms =
        y < 55
          ? g.int(0, 400)
          : y < 80
            ? g.int(400, 5000)
            : y < 88
              ? g.int(5000, 70_000)
              : y < 94
                ? -g.int(1, 3000)
                : g.pick([3_600_000, 86_400_000 + 1, 40 * 86_400_000]);
      steps.push({ op: 'clock', ms: backward ? ms : Math.abs(ms) });
    }
  }
  return { seed, start, rules, tiers, steps };
}

function toRule(c: RuleConfig): Rule<Req> {
  const { keyBy, plan: _, ...rule } = c;
  const key = keyBy === 'all' ? () => 'all' : keyBy === 'u' ? (r: Req) => r.u : (r: Req) => r.k;
  return { ...rule, key };
}

/** One side of the comparison: a limiter on a store. */
interface Side {
  lim: Limiter<Req>;
  sequential: boolean;
  store: Store;
  /** Results by step index: decisions to refund, reservations to settle. */
  results: Map<number, unknown>;
}

/** A step's answer as compared: values, or an error's code. */
async function answer(f: () => Promise<unknown>): Promise<unknown> {
  try {
    return await f();
  } catch (err) {
    // An uncoded error is a crash: compared too, so that a crash on either side is reported with its seed.
    const e = err as { code?: string; name?: string; message?: string };
    return { error: e.code ?? `${e.name}: ${e.message}` };
  }
}

/** An operation's options: its id and values, where the step has them. */
const idOf = (step: { id?: string; limit?: number }) => ({
  ...(step.id === undefined ? {} : { id: step.id }),
  ...(step.limit === undefined ? {} : { limit: step.limit }),
});

async function runStep(s: Side, steps: readonly Step[], i: number): Promise<unknown> {
  const step = steps[i] as Step;
  const { lim } = s;
  switch (step.op) {
    case 'consume':
    case 'peek':
      return answer(async () => {
        const d = await lim[step.op](step.req, step.cost === undefined ? undefined : { cost: step.cost });
        s.results.set(i, d);
        return d;
      });
    case 'reserve':
      return answer(async () => {
        const r = await lim.reserve(step.req, { cost: step.cost });
        s.results.set(i, r);
        return r.decision;
      });
    case 'flood':
      return answer(async () => {
        if (s.sequential) {
          const out: Decision[] = [];
          for (let n = 0; n < step.count; n++) out.push(await lim.consume(step.req));
          return out;
        }
        // Asked at once: a Redis store batches them into one script run, decided in order.
        return Promise.all(Array.from({ length: step.count }, () => lim.consume(step.req)));
      });
    case 'refund': {
      const d = s.results.get(step.of) as Decision | undefined;
      if (d === undefined) return 'no decision';
      const req = (steps[step.of] as { req: Req }).req;
      return answer(() => lim.refund(req, d, step.rules ? { rules: step.rules } : undefined));
    }
    case 'settle':
    case 'cancel': {
      const r = s.results.get(step.of) as Reservation | undefined;
      if (r === undefined) return 'no reservation';
      return answer(() => (step.op === 'settle' ? r.settle(step.actual) : r.cancel()));
    }
    case 'get':
      return answer(() => lim.get(step.rule, step.key, idOf(step)));
    case 'reset':
      return answer(() => lim.reset(step.rule, step.key));
    case 'resetReq':
      return answer(() => lim.reset(step.req));
    case 'block':
      return answer(() => lim.block(step.rule, step.key, step.ms, idOf(step)));
    case 'unblock':
      return answer(() => lim.unblock(step.rule, step.key, idOf(step)));
    case 'penalize':
    case 'reward':
      return answer(() => lim[step.op](step.rule, step.key, step.units, idOf(step)));
    case 'update':
      return answer(async () => lim.update(step.rule, step.changes));
    case 'clock':
      return step.ms;
  }
}

export interface Mismatch {
  step: number;
  memory: unknown;
  other: unknown;
}

/** The two stores of one run, made fresh for each program (`prefix` unique per run). */
export type StorePair = (
  clock: ManualClock,
  prefix: string,
) => {
  memory: Store;
  other: Store;
  /** Errors the other store emitted (its fallback decided instead) since last asked. */
  errors?: () => unknown[];
  /**
   * Floods one request after the other: for a Redis Cluster deciding a stack slot by slot,
   * where requests in flight together may see each other's reservations (docs/distributed.md).
   */
  sequential?: boolean;
  /**
   * Key states compared without `exists`: on a Cluster a slot that admitted a stack another
   * slot refused is refunded, and its key may stay, at zero.
   */
  ignoreExists?: boolean;
};

let runs = 0;

/** Runs `program` on both stores; the first step whose answers differ, or undefined. */
export async function runProgram(program: Program, stores: StorePair): Promise<Mismatch | undefined> {
  const clock = new ManualClock(program.start);
  const prefix = `df${program.seed}x${++runs}`;
  const pair = stores(clock, `${prefix}:`);
  const limiter = (store: Store): Side => ({
    lim: createLimiter<Req>({
      rules: program.rules.map(toRule),
      ...(program.tiers && {
        tiers: Object.fromEntries(Object.entries(program.tiers).map(([t, rs]) => [t, rs.map(toRule)])),
        tier: (r: Req) => r.t ?? 'free',
      }),
      store,
      clock,
      prefix,
    }),
    store,
    sequential: pair.sequential === true,
    results: new Map(),
  });
  const memory = limiter(pair.memory);
  const other = limiter(pair.other);
  try {
    for (const [i, step] of program.steps.entries()) {
      if (step.op === 'clock') clock.advance(step.ms);
      let a = await runStep(memory, program.steps, i);
      let b = await runStep(other, program.steps, i);
      if (pair.ignoreExists) [a, b] = [withoutExists(a), withoutExists(b)];
      if (!equal(a, b)) return { step: i, memory: a, other: b };
      const errors = pair.errors?.() ?? [];
      if (errors.length > 0) return { step: i, memory: a, other: { storeErrors: errors.map(String) } };
    }
    return undefined;
  } finally {
    await Promise.all([pair.memory.close(), pair.other.close()]);
  }
}

function withoutExists(x: unknown): unknown {
  if (typeof x !== 'object' || x === null || !('exists' in x)) return x;
  const { exists: _, ...rest } = x as Record<string, unknown>;
  return rest;
}

function equal(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Where two answers differ, one line per differing leaf (at most `max`), e.g. `[0].rules[1].resetMs: 61578 ≠ 60000`. */
export function differences(a: unknown, b: unknown, max = 12, path = ''): string[] {
  if (equal(a, b)) return [];
  const objects = typeof a === 'object' && a !== null && typeof b === 'object' && b !== null;
  if (!objects || Array.isArray(a) !== Array.isArray(b)) return [`${path || '.'}: ${JSON.stringify(a)} ≠ ${JSON.stringify(b)}`];
  const out: string[] = [];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) {
    const sub = Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`;
    out.push(...differences((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], max - out.length, sub));
    if (out.length >= max) break;
  }
  return out.slice(0, max);
}

/**
 * The program cut after its mismatching step, then without every step whose removal keeps
 * a mismatch (a step referring to a removed decision or reservation answers the same on
 * both sides, so removals stay valid programs).
 */
export async function shrink(program: Program, at: number, stores: StorePair): Promise<Program> {
  let best: Program = { ...program, steps: program.steps.slice(0, at + 1) };
  for (let i = best.steps.length - 2; i >= 0; i--) {
    const steps = best.steps.map((s, j) => (j === i ? ({ op: 'clock', ms: 0 } as Step) : s));
    const m = await runProgram({ ...best, steps }, stores);
    if (m !== undefined) best = { ...best, steps: steps.slice(0, m.step + 1) };
  }
  return best;
}

/** A program as text for a failure report (rules with their cost functions named). */
export function describeProgram(p: Program): string {
  const rule = ({ plan, ...r }: RuleConfig) =>
    JSON.stringify({
      ...r,
      cost: typeof r.cost === 'function' ? '(req) => req.n ?? 1' : r.cost,
      limit: plan === undefined ? r.limit : `(req) => req.L ?? ${plan}`,
    });
  const lines = [`seed ${p.seed}, start ${new Date(p.start).toISOString()} (${p.start})`, 'rules:', ...p.rules.map((r) => `  ${rule(r)}`)];
  if (p.tiers) for (const [t, rs] of Object.entries(p.tiers)) lines.push(`tier ${t}:`, ...rs.map((r) => `  ${rule(r)}`));
  // Steps a shrink emptied (no-op clock steps) are left out; the others keep their index.
  lines.push('steps:', ...p.steps.flatMap((s, i) => (s.op === 'clock' && s.ms === 0 ? [] : [`  ${i}: ${JSON.stringify(s)}`])));
  return lines.join('\n');
}
