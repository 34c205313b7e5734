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
