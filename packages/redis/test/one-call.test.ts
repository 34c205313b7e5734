/**
 * The common call (one op of cost 1 on Redis time) is decided straight through by a
 * closure of its own (lua/one.ts). It must decide exactly as the general path does: each
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
        if (v === 'foreign' && r() < 0.5) {
          await admin.hset(a, 'f', '1');
          await admin.hset(b, 'f', '1');
        } else if (v !== undefined) {
          await admin.set(a, v, 'PX', 600_000);
          await admin.set(b, v, 'PX', 600_000);
        }
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
          expect(va).not.toBeNull();
          expect(vb).not.toBeNull();
        }
        if (va !== null && vb !== null && va.length % 8 === 0 && (va.length !== 8 * 2 || d1.allowed)) {
          expect(va.length).toBe(vb.length);
          for (let k = 0; k < va.length / 8; k++)
            if (k !== 1) expect(va.readDoubleLE(8 * k), `case ${i}, field ${k}`).toBe(vb.readDoubleLE(8 * k));
        }
        if (va !== null) expect(await admin.pttl(a)).toBeGreaterThan(0);
      }
      // The cases reach both outcomes (the big limit admits everything).
      expect(admitted).toBeGreaterThan(10);
      if (spec.limit < 100) expect(refused).toBeGreaterThan(5);
    });
  }
});
