/**
 * The algorithm registry: one entry per algorithm, each consistent with its own check (the
 * state width a slab row holds, the kernel the same decision as the check), and every
 * derived table (codes, names, option checks) taken from it.
 */
import { describe, expect, it } from 'vitest';
import { registry, type State, takersOf, Verdict } from '../src/algorithms/index.js';
import { ALGORITHM_CODES, ALGORITHM_NAMES, algorithms, compileRule, type Rule } from '../src/index.js';

/** A rule of each algorithm, with the options only it takes. */
function ruleOf(a: (typeof ALGORITHM_NAMES)[number]): Rule {
  return { name: 'r', algorithm: a, limit: 5, window: '10s', countRejected: true };
}

describe('the algorithm registry', () => {
  it('names every algorithm once, with a code of its own (the storage kind and the Redis wire code)', () => {
    expect(new Set(ALGORITHM_NAMES).size).toBe(ALGORITHM_NAMES.length);
    for (const a of ALGORITHM_NAMES) {
      expect(registry[a].name).toBe(a);
      expect(ALGORITHM_CODES[a]).toBe(registry[a].code);
      expect(algorithms[a].check).toBe(registry[a].check);
      // The storage id carries the code: rules counting differently never share a state.
      expect(compileRule(ruleOf(a), 'tg').spec.id).toMatch(new RegExp(`^tg:r:${registry[a].code}10000`));
    }
    expect(new Set(Object.values(ALGORITHM_CODES)).size).toBe(ALGORITHM_NAMES.length);
  });

  it('gives each fixed-width algorithm the width its check writes and a kernel deciding as its check does', () => {
    for (const a of ALGORITHM_NAMES) {
      const def = registry[a];
      const r = compileRule(ruleOf(a), 'tg').spec;
      let s: State | undefined;
      for (let i = 0; i < 8; i++) {
        const now = 1_000_000 + i * 700;
        const c = def.check(s, now, r, 2);
        if (def.width === 0) expect(def.kernel).toBeUndefined();
        else {
          expect(c.next?.length).toBe(def.width);
          const kernel = def.kernel as NonNullable<typeof def.kernel>;
          const v = new Verdict();
          kernel(Float64Array.from(s ?? []), 0, s !== undefined, now, r, 2, v);
          expect({ allowed: v.allowed, remaining: v.remaining, resetMs: v.resetMs, retryAfterMs: v.retryAfterMs }).toEqual({
            allowed: c.allowed,
            remaining: c.remaining,
            resetMs: c.resetMs,
            retryAfterMs: c.retryAfterMs,
          });
        }
        s = c.next ?? s;
      }
    }
  });

  it("derives a rule's largest cost from its entry, in every reading", () => {
    for (const a of ALGORITHM_NAMES) {
      const readings = [{}, ...Object.values(registry[a].readings)];
      for (const reading of readings) {
        const spec = compileRule({ ...ruleOf(a), countRejected: false, ...reading, limit: 5 }, 'tg').spec;
        expect(spec.maxCost, `${a} ${JSON.stringify(reading)}`).toBe(registry[a].maxCost(spec));
      }
    }
    // A bucket's largest cost is its burst (a leaky queue's: its places), not its limit.
    expect(compileRule({ name: 'r', algorithm: 'token-bucket', limit: 5, window: '1s', burst: 9 }, 'tg').spec.maxCost).toBe(9);
    expect(compileRule({ name: 'r', algorithm: 'leaky-bucket', mode: 'queue', limit: 5, window: '1s', queue: 7 }, 'tg').spec.maxCost).toBe(
      7,
    );
  });

  it("names who takes an option from the entries' options (in the error of a rule that does not)", () => {
    expect(takersOf('burst')).toBe('a token-bucket or leaky-bucket meter rule');
    expect(takersOf('buckets')).toBe('a sliding-buckets rule');
    expect(() => compileRule({ ...ruleOf('sliding-log'), burst: 3 }, 'tg')).toThrow(takersOf('burst'));
  });

  it('checks the options only some algorithms take against the registry', () => {
    for (const a of ALGORITHM_NAMES) {
      const takes = registry[a].options;
      const tries: Array<[keyof Rule, unknown, string]> = [
        ['align', 'first-request', 'align'],
        ['burst', 3, 'burst'],
        ['buckets', 5, 'buckets'],
      ];
      for (const [option, value, name] of tries) {
        const make = () => compileRule({ ...ruleOf(a), [option]: value }, 'tg');
        if (takes.includes(name as never)) expect(make).not.toThrow();
        else expect(make).toThrow(expect.objectContaining({ code: 'TG_INVALID_OPTION' }));
      }
    }
  });
});
