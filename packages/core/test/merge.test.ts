import { type Decision, mergeDecisions } from '@tollgate/core';
import { describe, expect, it } from 'vitest';

function d(over: Partial<Decision>): Decision {
  return { allowed: true, delayMs: 0, retryAfterMs: 0, rejectedBy: [], dryRunRejectedBy: [], rules: [], at: 0, ...over };
}
const rule = (name: string, allowed = true) => ({
  name,
  allowed,
  limit: 1,
  remaining: 0,
  windowMs: 1,
  resetMs: 1,
  retryAfterMs: allowed ? 0 : 5,
  delayMs: 0,
});

describe('mergeDecisions', () => {
  it('returns the later decision alone when there is no earlier one', () => {
    const later = d({ rules: [rule('a')] });
    expect(mergeDecisions(undefined, later)).toBe(later);
  });
  it('combines rules in order, keeps the longer delay, and refuses when either refused', () => {
    const app = d({ rules: [rule('app')], delayMs: 30, at: 1, dryRunRejectedBy: ['shadow'] });
    const route = d({ allowed: false, rules: [rule('route', false)], rejectedBy: ['route'], retryAfterMs: 5, at: 2, degraded: 'local' });
    expect(mergeDecisions(app, route)).toEqual({
      allowed: false,
      delayMs: 0,
      retryAfterMs: 5,
      rejectedBy: ['route'],
      dryRunRejectedBy: ['shadow'],
      rules: [rule('app'), rule('route', false)],
      at: 2,
      degraded: 'local',
    });
    expect(mergeDecisions(app, d({ delayMs: 10 })).delayMs).toBe(30);
    expect(app.rules).toHaveLength(1);
  });
});
