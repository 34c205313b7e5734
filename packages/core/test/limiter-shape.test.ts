/**
 * The limiter object keeps V8's fast properties. An object literal with a getter starts in
 * dictionary mode, so when `rules` and `tiers` became accessors every `limiter.consume`
 * paid a hash lookup (about 140 instructions of a 3 000-instruction decision, counted with
 * `node test/bench/consume.callgrind.mjs`). Checked in a child process with
 * `--allow-natives-syntax` on the built package (the suite builds before it runs).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CORE = fileURLToPath(new URL('../dist/index.mjs', import.meta.url));

describe('limiter object shape', () => {
  it('a limiter with rules, with tiers and an extended one have fast properties (rules and tiers as accessors kept the limiter in dictionary mode)', () => {
    const script = `
      const { createLimiter } = await import(${JSON.stringify(CORE)});
      const rule = { name: 'ip', key: (r) => r.k, limit: 5, window: '1h', algorithm: 'fixed-window' };
      const plain = createLimiter({ rules: [rule] });
      const tiered = createLimiter({ rules: [rule], tiers: { free: [{ ...rule, name: 'free' }] }, tier: () => 'free' });
      const extended = plain.extend([{ ...rule, name: 'route' }]);
      const shapes = [plain, tiered, extended].map((l) => %HasFastProperties(l));
      console.log(JSON.stringify({ shapes, rules: [plain.rules.length, extended.rules.length], tiers: Object.keys(tiered.tiers) }));
    `;
    const out = execFileSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ shapes: [true, true, true], rules: [1, 2], tiers: ['free'] });
  });
});
