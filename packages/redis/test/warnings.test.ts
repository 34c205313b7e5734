/**
 * The Redis store's warning catalogue (REDIS_WARNINGS) and docs/errors.md agree: every code
 * is documented under "Process warnings", and the page names no TOLLGATE_REDIS_ code that
 * does not exist.
 */
import { readFileSync } from 'node:fs';
import { REDIS_WARNINGS } from '@tollgate/redis';
import { describe, expect, it } from 'vitest';

const docs = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
const warnings = docs.slice(docs.indexOf('## Process warnings'));

describe('Redis warning catalogue', () => {
  it('every code is TOLLGATE_REDIS_-prefixed, described and documented in docs/errors.md, and the docs list no other', () => {
    const codes = Object.keys(REDIS_WARNINGS);
    expect(codes.length).toBeGreaterThan(0);
    for (const code of codes) {
      expect(code).toMatch(/^TOLLGATE_REDIS_[A-Z_]+$/);
      expect(REDIS_WARNINGS[code as keyof typeof REDIS_WARNINGS].length).toBeGreaterThan(10);
      expect(warnings, `${code} missing from docs/errors.md`).toContain(`\`${code}\`:`);
    }
    const mentioned = new Set([...docs.matchAll(/\bTOLLGATE_REDIS_[A-Z_]+\b/g)].map((m) => m[0]));
    expect(mentioned).toEqual(new Set(codes));
  });
});
