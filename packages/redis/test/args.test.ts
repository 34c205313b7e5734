/**
 * The store function's wire format: the plan of the common call (one op of cost 1 on
 * Redis time), kept with the rule's wire text, is the plan the general builder makes for
 * it, for every algorithm and option, consume and peek, per least TTL.
 */
import { compileRule, type Rule, type StoreOp } from '@tollgate/core';
import { describe, expect, it } from 'vitest';
import { type Command, decideArgs } from '../src/args.js';

const rules: Rule<unknown>[] = [
  { name: 'a', limit: 10, window: '1m' },
  { name: 'b', algorithm: 'fixed-window', limit: 3, window: 1500, align: 'first-request', countRejected: true },
  { name: 'c', algorithm: 'token-bucket', limit: 5, window: '1s', burst: 9 },
  { name: 'd', algorithm: 'leaky-bucket', limit: 2, window: '1s', mode: 'queue', queue: 3 },
  { name: 'e', algorithm: 'sliding-log', limit: 7, window: '10s', dryRun: true, blockFor: '1m' },
  { name: 'f', quota: 100, per: 'month' },
];

/** What the general builder sends for one such op: two such stacks, then one run of one. */
function built(op: StoreOp, cmd: Command, minTtl: string): string {
  const st = { cmd, ops: [op], now: undefined };
  const [plan] = decideArgs([st, st], ['k1', 'k2'], minTtl).args;
  return (plan as string).replace(/\n2 ([cp])1:1$/, '\n1 $11:1');
}

describe('the plan of one op alone', () => {
  for (const rule of rules) {
    for (const cmd of ['c', 'p'] as const) {
      it(`${rule.name} (${cmd}): the builder's plan, for two least TTLs`, () => {
        const spec = compileRule(rule, 'p').spec;
        const op: StoreOp = { rule: spec, key: 'x', cost: 1 };
        for (const minTtl of ['0', '2500', '0']) {
          const call = decideArgs([{ cmd, ops: [op], now: undefined }], ['k'], minTtl);
          expect(call.keys).toEqual(['k']);
          expect(call.args).toEqual([built(op, cmd, minTtl)]);
        }
      });
    }
  }

  it('a cost other than 1 or a supplied time goes through the builder', () => {
    const spec = compileRule({ name: 'g', limit: 10, window: '1m' }, 'p').spec;
    const two = decideArgs([{ cmd: 'c', ops: [{ rule: spec, key: 'x', cost: 2 }], now: undefined }], ['k'], '0');
    expect(two.args[0]).toMatch(/\n1 c1:2$/);
    const timed = decideArgs([{ cmd: 'c', ops: [{ rule: spec, key: 'x', cost: 1 }], now: 1234 }], ['k'], '0');
    expect(timed.args).toEqual([expect.stringMatching(/\n1 C1:1$/), '1234']);
  });
});

describe('the plan of a stack alone', () => {
  const specs = rules.map((r) => compileRule(r, 'p').spec);
  /** What the general builder sends for the stack: the stack twice, then one run of one. */
  function builtStack(ops: StoreOp[], cmd: Command, minTtl: string): { keys: string[]; args: string[] } {
    const keys = ops.map((_, i) => `k${i}`);
    const st = { cmd, ops, now: undefined };
    const twice = decideArgs([st, { ...st, ops: [...ops] }], [...keys, ...keys.map((k) => `${k}'`)], minTtl);
    return { keys, args: [(twice.args[0] as string).replace(/\n2 ([cp]\S*)$/, '\n1 $1')] };
  }

  it("is the builder's plan whether kept or built, and follows the rules, costs, command and least TTL", () => {
    const cases: [StoreOp[], Command, string][] = [
      [specs.slice(0, 4).map((rule) => ({ rule, key: 'x', cost: 1 })), 'c', '0'],
      [specs.slice(0, 4).map((rule) => ({ rule, key: 'x', cost: 1 })), 'c', '0'],
      [specs.slice(0, 4).map((rule) => ({ rule, key: 'x', cost: 1 })), 'p', '0'],
      [specs.slice(0, 4).map((rule) => ({ rule, key: 'x', cost: 1 })), 'c', '2500'],
      [specs.slice(0, 4).map((rule, i) => ({ rule, key: 'x', cost: i === 2 ? 3 : 1 })), 'c', '0'],
      [specs.slice(0, 3).map((rule) => ({ rule, key: 'x', cost: 1 })), 'c', '0'],
      [[specs[0], specs[5], specs[1]].map((rule) => ({ rule: rule as StoreOp['rule'], key: 'x', cost: 1 })), 'c', '0'],
      [specs.slice(0, 4).map((rule) => ({ rule, key: 'x', cost: 1 })), 'c', '0'],
      [specs.slice(0, 1).map((rule) => ({ rule, key: 'x', cost: 2 })), 'c', '0'],
    ];
    for (const [ops, cmd, minTtl] of cases) {
      const want = builtStack(ops, cmd, minTtl);
      const got = decideArgs([{ cmd, ops, now: undefined }], want.keys, minTtl);
      expect(got.keys).toEqual(want.keys);
      expect(got.args).toEqual(want.args);
    }
  });

  it('a stack that names a key twice, or on supplied time, goes through the builder', () => {
    const ops: StoreOp[] = [
      { rule: specs[0] as StoreOp['rule'], key: 'x', cost: 1 },
      { rule: specs[0] as StoreOp['rule'], key: 'x', cost: 1 },
    ];
    decideArgs(
      [{ cmd: 'c', ops: [ops[0] as StoreOp, { ...(ops[0] as StoreOp), rule: specs[1] as StoreOp['rule'] }], now: undefined }],
      ['a', 'b'],
      '0',
    );
    const same = decideArgs([{ cmd: 'c', ops, now: undefined }], ['k', 'k'], '0');
    expect(same.keys).toEqual(['k']);
    expect(same.args[0]).toMatch(/\n1 c1:1,1:1@1$/);
    const timed = decideArgs([{ cmd: 'c', ops, now: 5 }], ['k1', 'k2'], '0');
    expect(timed.args).toEqual([expect.stringMatching(/\n1 C1:1,1:1$/), '5']);
  });
});
