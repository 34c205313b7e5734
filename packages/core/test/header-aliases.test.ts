/**
 * Header mode names users know: express-rate-limit's `'draft-8'` (and `'draft-9'`) are the
 * field syntax of draft-10 (two structured-field lists of named items with q/w and r/t),
 * so they are read as `'draft-10'`; an unknown name suggests the nearest one.
 */
import { compileHeaders, parseHeaderModes, TollgateError } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

const rule = { name: 'ip', limit: 100, windowMs: 60_000, remaining: 42, resetMs: 18_000, allowed: true } as never;

describe('header mode aliases', () => {
  it("headers: 'draft-8' was refused although it is the field syntax tollgate sends as draft-10", () => {
    expect(parseHeaderModes('draft-8')).toEqual(['draft-10']);
    expect(parseHeaderModes(['draft-9', 'legacy'])).toEqual(['draft-10', 'legacy']);
    expect(parseHeaderModes(['draft-8', 'draft-10'])).toEqual(['draft-10']);
    const a = compileHeaders('draft-8')?.([rule], 0);
    expect(a).toEqual(compileHeaders('draft-10')?.([rule], 0));
    expect(a?.map((f) => `${f.name}: ${f.value}`)).toEqual(['RateLimit-Policy: "ip";q=100;w=60', 'RateLimit: "ip";r=42;t=18']);
  });

  it('an unknown mode names the nearest one', () => {
    for (const [bad, near] of [
      ['draft10', 'draft-10'],
      ['Draft-7', 'draft-7'],
      ['legacyy', 'legacy'],
    ]) {
      let err: unknown;
      try {
        parseHeaderModes(bad as 'draft-10');
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe('TG_INVALID_HEADERS');
      expect((err as TollgateError).fix, bad).toContain(`Did you mean '${near}'?`);
    }
  });
});
