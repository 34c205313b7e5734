/**
 * sanitizeKey's cache of hashed keys (packages/core/src/limiter.ts): a cached answer is the
 * hash itself, before and after the cache is emptied at its bound, and long keys (never
 * cached) hash the same every time.
 */
import { createHash } from 'node:crypto';
import { sanitizeKey } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

const sha = (key: string) => `#${createHash('sha256').update(key, 'utf16le').digest('base64url').slice(0, 32)}`;

describe('sanitizeKey cache', () => {
  it('answers a repeated key needing a hash with its hash, across the cache bound', () => {
    expect(sanitizeKey('GET /users')).toBe(sha('GET /users'));
    expect(sanitizeKey('GET /users')).toBe(sha('GET /users'));
    // More distinct keys than the cache holds: it is emptied, answers stay exact.
    for (let i = 0; i < 10_000; i++) expect(sanitizeKey(`k ${i}`)).toBe(sha(`k ${i}`));
    expect(sanitizeKey('GET /users')).toBe(sha('GET /users'));
    expect(sanitizeKey('k 17')).toBe(sha('k 17'));
  });

  it('hashes long keys (not cached) the same every time, and plain keys stay verbatim', () => {
    const long = 'x'.repeat(500);
    expect(sanitizeKey(long)).toBe(sha(long));
    expect(sanitizeKey(long)).toBe(sha(long));
    expect(sanitizeKey('10.0.0.1')).toBe('10.0.0.1');
    expect(sanitizeKey('#plain')).toBe(sha('#plain'));
  });
});
