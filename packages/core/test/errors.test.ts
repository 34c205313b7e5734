/**
 * The error catalogue and its documentation agree (SPEC 12): every code in ERROR_CODES is
 * unique and well-formed, documented in docs/errors.md, and the docs list no code that does
 * not exist.
 */
import { readFileSync } from 'node:fs';
import { ERROR_CODES, type ErrorCode, TollgateError } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

const docs = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
const documented = [...docs.matchAll(/^## (\S+)\s*$/gm)].map((m) => m[1] as string);
const codes = Object.keys(ERROR_CODES) as ErrorCode[];

describe('error catalogue', () => {
  it('has well-formed, unique codes with a description each', () => {
    expect(codes.length).toBeGreaterThan(0);
    for (const code of codes) {
      expect(code).toMatch(/^TG_[A-Z][A-Z0-9_]*[A-Z0-9]$/);
      expect(ERROR_CODES[code].length).toBeGreaterThan(10);
    }
    expect(new Set(codes.map((c) => c.toLowerCase())).size).toBe(codes.length);
    expect(new Set(Object.values(ERROR_CODES)).size).toBe(codes.length);
  });

  it('every code is documented in docs/errors.md, once', () => {
    for (const code of codes) expect(documented, `${code} missing from docs/errors.md`).toContain(code);
    expect(new Set(documented).size).toBe(documented.length);
  });

  it('docs/errors.md documents no code that does not exist', () => {
    for (const code of documented) expect(codes, `docs/errors.md lists unknown ${code}`).toContain(code);
    // Nor mentions one anywhere in its prose.
    for (const [code] of docs.matchAll(/\bTG_[A-Z0-9_]+\b/g)) expect(codes, `docs/errors.md mentions unknown ${code}`).toContain(code);
  });

  it('each code round-trips through TollgateError', () => {
    for (const code of codes) {
      const err = new TollgateError(code, 'm');
      expect(err.code).toBe(code);
      expect(err).toBeInstanceOf(TollgateError);
    }
  });
});
