/**
 * The client's error catalogue (SPEC 12): stable, unique codes, each documented in
 * docs/client.md, and a class whose instanceof survives duplicate installs.
 */
import { readFileSync } from 'node:fs';
import { CLIENT_ERROR_CODES, TollgateClientError } from '@tollgate/client';
import { describe, expect, it } from 'vitest';

const docs = readFileSync(new URL('../../../docs/client.md', import.meta.url), 'utf8');
const documented = new Set([...docs.matchAll(/^\| `(TGC_[A-Z_]+)` \|/gm)].map((m) => m[1]));

describe('client error catalogue', () => {
  it('every code is TGC_-prefixed and documented in docs/client.md, and the docs list no other', () => {
    const codes = Object.keys(CLIENT_ERROR_CODES);
    for (const c of codes) expect(c).toMatch(/^TGC_[A-Z_]+$/);
    expect(new Set(codes)).toEqual(documented);
  });

  it('instanceof holds for an error built by another copy of the class (registry-symbol brand)', () => {
    const brand = Symbol.for('tollgate.client.error');
    const foreign = Object.assign(new Error('x'), { [brand]: true, code: 'TGC_TIMEOUT' });
    expect(foreign).toBeInstanceOf(TollgateClientError);
    expect(new Error('plain')).not.toBeInstanceOf(TollgateClientError);
    const own = new TollgateClientError('TGC_TIMEOUT', 'm');
    expect(own).toBeInstanceOf(TollgateClientError);
    expect(own).toBeInstanceOf(Error);
    expect(own.name).toBe('TollgateClientError');
  });
});
