/**
 * The common call (one op of cost 1 on Redis time) is decided straight through by a
 * closure of its own (lua/one.lua). It must decide exactly as the general path does: each
 * case here puts the same value under two keys, decides the first with the common call on
 * Redis time, then the second with the general path at the time the first replied
 * (supplied time), and compares the replies and what was written (but the expiry the TTL
 * was set for, which supplied time does not record). Values are crafted around Redis' own
 * clock: current and older windows, a clock behind the stored window, blocks, counts at
 * and past the limit, fractional and negative counts, foreign values, another type.
 * Both the function library (FCALL) and the script (EVAL) are run.
 */
import { compileRule, type Rule, type RuleSpec, type StoreOp } from '@tollgate/core';
import { STORE_LIBRARY, STORE_SCRIPT } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../../test/setup/redis.js';
import { decideArgs, parseDecisions } from '../src/args.js';
import { STORE_FUNCTION } from '../src/lua/index.js';

let server: RedisServer;
let admin: Redis;

beforeAll(async () => {
  server = await startRedis();
  admin = new Redis({ port: server.port, host: '127.0.0.1' });
  await admin.call('FUNCTION', 'LOAD', 'REPLACE', STORE_LIBRARY);
});

afterAll(async () => {
  admin.disconnect();
  await server.destroy();
});

const rules: Rule<unknown>[] = [
  { name: 'w', limit: 4, window: '1m' },
  { name: 'wbig', limit: 1e9, window: '1h' },
  { name: 'wcr', limit: 3, window: '10s', countRejected: true, blockFor: '1m' },
  { name: 'wdry', limit: 2, window: '1m', dryRun: true },
  { name: 'f', algorithm: 'fixed-window', limit: 3, window: '1m' },
  { name: 'fcr', algorithm: 'fixed-window', limit: 2, window: 1500, countRejected: true },
  { name: 't', algorithm: 'token-bucket', limit: 5, window: '1s', burst: 9 },
  { name: 'tcr', algorithm: 'token-bucket', limit: 2, window: '1s', countRejected: true, blockFor: 500 },
];

/** A small deterministic generator, so that a failure repeats. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;

function doubles(xs: readonly number[]): Buffer {
  const b = Buffer.alloc(8 * xs.length);
  for (let i = 0; i < xs.length; i++) b.writeDoubleLE(xs[i] as number, 8 * i);
  return b;
}

/** A value for a key of `spec`'s rule around Redis time `now`: an entry, or not. */
function valueFor(spec: RuleSpec, now: number, r: () => number): Buffer | string | undefined {
  const kind = r();
  if (kind < 0.08) return undefined;
  if (kind < 0.12) return 'foreign';
  if (kind < 0.16) return doubles([pick(r, [0, now + 3000])]);
  const W = spec.windowMs;
  const L = spec.limit;
  const ws = now - (now % W);
  const b = pick(r, [0, 0, 0, now - 10, now + 3000]);
  if (spec.algorithm === 'token-bucket') {
    const cap = spec.burst * W;
    const last = pick(r, [now - 100, now - 5, now - 3000, now + 300, now]);
    const scaled = pick(r, [0, W, W - 1, cap / 2, cap, cap + 5, -W, 3.5]);
    return doubles([b, pick(r, [last + 1000, -Infinity]), last, scaled]);
  }
  const start = pick(r, [ws, ws, ws - W, ws - 2 * W, ws + W]);
  const count = () => pick(r, [0, 1, 2, L - 1, L, L + 1, 0.5, -1]);
  const x0 = pick(r, [start + 2 * W, start + W, -Infinity]);
  if (spec.algorithm === 'fixed-window') return doubles([b, x0, start, count()]);
  return doubles([b, x0, start, count(), count()]);
}

/** Puts `v` under keys a and b (a foreign value: half the time as a hash instead). */
async function putBoth(a: string, b: string, v: Buffer | string | undefined, r: () => number): Promise<void> {
  if (v === 'foreign' && r() < 0.5) {
    await admin.hset(a, 'f', '1');
    await admin.hset(b, 'f', '1');
  } else if (v !== undefined) {
    await admin.set(a, v, 'PX', 600_000);
    await admin.set(b, v, 'PX', 600_000);
  }
}

/**
 * An admitted consume's entry is there until its expiry, which is at least the decision's
 * time plus the op's resetMs (a window's end, a bucket's refill): absent only once Redis'
 * clock has passed that (a short window may end between the write and this read on a busy
 * machine).
 */
async function expectWritten(value: Buffer | null, until: number, label: string): Promise<void> {
  if (value !== null) return;
  const [sec, us] = (await admin.call('TIME')) as [string, string];
  expect(Number(sec) * 1000 + Math.floor(Number(us) / 1000), `${label}: the entry is gone before its expiry`).toBeGreaterThanOrEqual(until);
}

type Run = (key: string, args: readonly string[]) => Promise<Buffer>;

const runs: [string, Run][] = [
  ['FCALL', (key, args) => admin.callBuffer('FCALL', STORE_FUNCTION, '1', key, ...args) as Promise<Buffer>],
  ['EVAL', (key, args) => admin.callBuffer('EVAL', STORE_SCRIPT, '1', key, ...args) as Promise<Buffer>],
];

describe.each(runs)('the common call through %s', (_, run) => {
  for (const rule of rules) {
    it(`${rule.name}: decides and writes as the general path at the same time`, async () => {
      const spec = compileRule(rule, 'p').spec;
      const op: StoreOp = { rule: spec, key: 'x', cost: 1 };
      const r = rng(rule.name.length * 7919 + spec.limit);
      let admitted = 0;
      let refused = 0;
      for (let i = 0; i < 150; i++) {
        const a = `one:${rule.name}:a`;
        const b = `one:${rule.name}:b`;
        await admin.del(a, b);
        const [sec, us] = (await admin.call('TIME')) as [string, string];
        const now = Number(sec) * 1000 + Math.floor(Number(us) / 1000);
        const v = valueFor(spec, now, r);
        await putBoth(a, b, v, r);
        const cmd = r() < 0.85 ? 'c' : 'p';
        const fast = decideArgs([{ cmd, ops: [op], now: undefined }], [a], '0');
        const [d1] = parseDecisions(await run(a, fast.args), [1]);
        if (d1 === undefined) throw new Error('no decision');
        const general = decideArgs([{ cmd, ops: [op], now: d1.now }], [b], '0');
        const [d2] = parseDecisions(await run(b, general.args), [1]);
        expect(d2, `case ${i}: ${String(v instanceof Buffer ? v.toString('hex') : v)}`).toEqual(d1);
        // (A dry run's stack is admitted whatever its rule says: the rule's outcome counts.)
        if (d1.outcomes[0]?.allowed) admitted++;
        else refused++;
        const [va, vb] = [await admin.getBuffer(a).catch(() => null), await admin.getBuffer(b).catch(() => null)];
        if (cmd === 'c' && d1.allowed && !spec.dryRun) {
          const until = d1.now + (d1.outcomes[0]?.resetMs ?? 0);
          await expectWritten(va, until, `case ${i}`);
          await expectWritten(vb, until, `case ${i}`);
        }
        if (va !== null && vb !== null && va.length % 8 === 0 && (va.length !== 8 * 2 || d1.allowed)) {
          expect(va.length).toBe(vb.length);
          for (let k = 0; k < va.length / 8; k++)
            if (k !== 1) expect(va.readDoubleLE(8 * k), `case ${i}, field ${k}`).toBe(vb.readDoubleLE(8 * k));
        }
        // Every written key has an expiry (-1 is a key without one); 0 or -2 when its window ended since the write.
        if (va !== null) expect(await admin.pttl(a)).not.toBe(-1);
      }
      // The cases reach both outcomes (the big limit admits everything).
      expect(admitted).toBeGreaterThan(10);
      if (spec.limit < 100) expect(refused).toBeGreaterThan(5);
    });
  }
});

/**
 * Stacks of several ops and batches of stacks, all of cost 1 on Redis time with no key
 * named twice, are decided straight through too (one MGET, every op checked, then the
 * writes). Each case puts crafted values under the keys of a call and under a copy of them,
 * decides the first call on Redis time and the copy on the general path at the time the
 * first replied, and compares the decisions and every value written.
 */
describe.each(runs)('stacks and batches straight through, through %s', (_, run) => {
  const specs = rules.map((rule) => compileRule(rule, 'p').spec);
  // The general rules of the stack path too: a sliding log (not decided straight through)
  // makes its whole call go the general way.
  const log = compileRule({ name: 'log', algorithm: 'sliding-log', limit: 3, window: '1m' }, 'p').spec;
  const callOf = (keys: readonly string[], args: readonly string[]): Promise<Buffer> =>
    run === runs[0]?.[1]
      ? (admin.callBuffer('FCALL', STORE_FUNCTION, String(keys.length), ...keys, ...args) as Promise<Buffer>)
      : (admin.callBuffer('EVAL', STORE_SCRIPT, String(keys.length), ...keys, ...args) as Promise<Buffer>);

  for (const [name, maxStacks] of [
    ['one stack of several ops', 1],
    ['a batch of stacks', 5],
  ] as const) {
    it(`${name}: decides and writes as the general path at the same time`, async () => {
      const r = rng(maxStacks * 104729 + 17);
      let admitted = 0;
      let refused = 0;
      let straight = 0;
      for (let i = 0; i < 120; i++) {
        const [sec, us] = (await admin.call('TIME')) as [string, string];
        const now = Number(sec) * 1000 + Math.floor(Number(us) / 1000);
        const nStacks = 1 + Math.floor(r() * maxStacks);
        const cmd = r() < 0.85 ? 'c' : 'p';
        const stacks: { ops: StoreOp[] }[] = [];
        // Each key's stack and op.
        const at_: [number, number][] = [];
        const keysA: string[] = [];
        const keysB: string[] = [];
        for (let j = 0; j < nStacks; j++) {
          // 2 or 3 ops in a lone stack, 1 to 3 in a batch; distinct rules.
          const n = maxStacks === 1 ? 2 + Math.floor(r() * 2) : 1 + Math.floor(r() * 3);
          const pool = r() < 0.05 ? [...specs, log] : [...specs];
          const ops: StoreOp[] = [];
          for (let k = 0; k < n; k++) {
            const spec = pool.splice(Math.floor(r() * pool.length), 1)[0] as RuleSpec;
            const a = `stack:${j}:${k}:a`;
            const b = `stack:${j}:${k}:b`;
            await admin.del(a, b);
            // Mostly values that admit, so that whole calls go straight through.
            const v = r() < 0.6 ? (r() < 0.5 ? undefined : valueFor(spec, now, r)) : valueFor(spec, now, r);
            await putBoth(a, b, v, r);
            ops.push({ rule: spec, key: a, cost: 1 });
            keysA.push(a);
            keysB.push(b);
            at_.push([j, k]);
          }
          stacks.push({ ops });
        }
        const sizes = stacks.map((s) => s.ops.length);
        const fast = decideArgs(
          stacks.map((s) => ({ cmd, ops: s.ops, now: undefined })),
          keysA,
          '0',
        );
        const replyA = await callOf(fast.keys, fast.args);
        // Decided straight through: the compact reply (see parseDecisions).
        if (replyA.length % 16 === 8) straight++;
        const d1 = parseDecisions(replyA, sizes);
        const at = d1[0]?.now as number;
        const general = decideArgs(
          stacks.map((s) => ({ cmd, ops: s.ops, now: at })),
          keysB,
          '0',
        );
        const d2 = parseDecisions(await callOf(general.keys, general.args), sizes);
        expect(d2, `case ${i}`).toEqual(d1);
        for (const d of d1) {
          if (d.allowed) admitted++;
          else refused++;
        }
        for (let k = 0; k < keysA.length; k++) {
          const [va, vb] = [
            await admin.getBuffer(keysA[k] as string).catch(() => null),
            await admin.getBuffer(keysB[k] as string).catch(() => null),
          ];
          // (On supplied time the general path also deletes an entry whose own expiry has
          // passed, which Redis' TTL removes on Redis time: both are read as absent.)
          const [j, o] = at_[k] as [number, number];
          if (cmd === 'c' && d1[j]?.allowed && d1[j]?.outcomes[o]?.allowed && !(stacks[j]?.ops[o]?.rule.dryRun ?? true)) {
            const until = at + (d1[j]?.outcomes[o]?.resetMs ?? 0);
            await expectWritten(va, until, `case ${i}, key ${k}`);
            await expectWritten(vb, until, `case ${i}, key ${k}`);
          }
          if (va !== null && vb !== null && va.length % 8 === 0 && va.length > 16) {
            expect(va.length).toBe(vb.length);
            for (let f = 0; f < va.length / 8; f++)
              if (f !== 1) expect(va.readDoubleLE(8 * f), `case ${i}, key ${k}, field ${f}`).toBe(vb.readDoubleLE(8 * f));
          }
          // Every key has a TTL (-1: none); a bucket's may have run out since (-2: gone).
          if (va !== null) expect(await admin.pttl(keysA[k] as string)).not.toBe(-1);
        }
      }
      expect(admitted).toBeGreaterThan(20);
      expect(refused).toBeGreaterThan(5);
      // Both paths are taken.
      expect(straight).toBeGreaterThan(10);
      expect(straight).toBeLessThan(110);
    });
  }

  it('replies the admitted stacks compactly, and a refusal in any stack the general way', async () => {
    const w = specs[0] as RuleSpec;
    // A window from the key's first call: on Redis time a clock-aligned minute ending among the
    // four calls would give it a fresh count, and the fourth would be admitted.
    const f = compileRule({ name: 'f', algorithm: 'fixed-window', align: 'first-request', limit: 3, window: '1m' }, 'p').spec;
    const keys = ['c:1', 'c:2', 'c:3'];
    await admin.del(...keys);
    const stacks = [
      { cmd: 'c' as const, ops: [{ rule: w, key: 'c:1', cost: 1 }], now: undefined },
      {
        cmd: 'c' as const,
        ops: [
          { rule: f, key: 'c:2', cost: 1 },
          { rule: w, key: 'c:3', cost: 1 },
        ],
        now: undefined,
      },
    ];
    const call = decideArgs(stacks, keys, '0');
    const reply = await callOf(call.keys, call.args);
    // now, then remaining and resetMs for each of the three ops.
    expect(reply.length).toBe(8 * 7);
    const [d1, d2] = parseDecisions(reply, [1, 2]);
    expect(d1?.outcomes[0]?.remaining).toBe(3);
    expect(d2?.outcomes.map((o) => o.remaining)).toEqual([2, 3]);
    // The fixed window (limit 3) refuses on the fourth call: that call goes the general way
    // and writes nothing of its admitted ops in the refused stack.
    await callOf(call.keys, call.args);
    await callOf(call.keys, call.args);
    const before = await admin.getBuffer('c:3');
    const last = await callOf(call.keys, call.args);
    expect(last.length).toBe(16 * 2 + 32 * 3);
    const [e1, e2] = parseDecisions(last, [1, 2]);
    expect(e1?.allowed).toBe(true);
    expect(e2?.allowed).toBe(false);
    expect(await admin.getBuffer('c:3')).toEqual(before);
  });
});
