import diagnosticsChannel from 'node:diagnostics_channel';
import {
  CHANNEL_NAMES,
  constant,
  createLimiter,
  type Decision,
  type DecisionMessage,
  ManualClock,
  PROBLEM_QUOTA_EXCEEDED,
  PROBLEM_REDUCED_CAPACITY,
  publishDecision,
  publishStoreError,
  refusal,
  retryAfterSeconds,
} from '@tollgate/core';
import { messageContentType, messageText, storeFailureRefusal } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

function refused(over: Partial<Decision> = {}): Decision {
  return {
    allowed: false,
    delayMs: 0,
    retryAfterMs: 1,
    rejectedBy: ['user'],
    dryRunRejectedBy: [],
    rules: [
      {
        name: 'user',
        allowed: false,
        limit: 5,
        remaining: 0,
        windowMs: 60_000,
        resetMs: 60_000,
        retryAfterMs: 1,
        delayMs: 0,
        reason: 'limit',
      },
    ],
    at: 0,
    ...over,
  };
}

describe('Retry-After', () => {
  it('is ceil(retryAfterMs / 1000) and never 0 on a refusal', () => {
    expect(retryAfterSeconds(refused({ retryAfterMs: 1 }))).toBe(1);
    expect(retryAfterSeconds(refused({ retryAfterMs: 1000 }))).toBe(1);
    expect(retryAfterSeconds(refused({ retryAfterMs: 1001 }))).toBe(2);
    expect(retryAfterSeconds(refused({ retryAfterMs: 0 }))).toBe(1);
  });
  it('is absent when the cost can never be admitted', () => {
    const d = refused({ retryAfterMs: 0 });
    (d.rules[0] as { reason?: string }).reason = 'cost_exceeds_limit';
    expect(retryAfterSeconds(d)).toBeUndefined();
    const r = refusal(d);
    expect(r.headers.map(([n]) => n)).toEqual(['Cache-Control']);
    expect(r.body.detail).toMatch(/can ever admit/);
  });
});

describe('refusal()', () => {
  it('is a 429 problem+json with no-store and the violated policies', async () => {
    const clock = new ManualClock(0);
    const l = createLimiter({
      rules: [
        { name: 'user', key: constant('u'), limit: 10, window: '1m' },
        { name: 'tenant', key: constant('t'), limit: 1, window: '1m', algorithm: 'fixed-window' },
      ],
      clock,
    });
    await l.consume({});
    clock.advance(1_500);
    const d = await l.consume({});
    const r = refusal(d);
    expect(r.status).toBe(429);
    expect(r.contentType).toBe('application/problem+json');
    expect(r.headers).toEqual([
      ['Cache-Control', 'no-store'],
      ['Retry-After', '59'],
    ]);
    expect(r.body).toEqual({
      type: PROBLEM_QUOTA_EXCEEDED,
      title: 'Too Many Requests',
      status: 429,
      detail: 'Rate limit exceeded for policy "tenant". Retry in 59 seconds.',
      'violated-policies': ['tenant'],
    });
    expect(refusal(d, { statusCode: 403 }).body.status).toBe(403);
  });
  it('is a 503 temporary-reduced-capacity when the store failed under deny', () => {
    const r = refusal({ ...refused({ retryAfterMs: 0, rejectedBy: [] }), degraded: 'deny' } as Decision);
    expect(r.status).toBe(503);
    expect(r.body.type).toBe(PROBLEM_REDUCED_CAPACITY);
    expect(r.body['violated-policies']).toBeUndefined();
    expect(r.headers).toContainEqual(['Retry-After', '1']);
  });
});

describe('diagnostics channels', () => {
  it('publish decisions, refusals and dry-run refusals on their channels', () => {
    const seen: Array<[string, DecisionMessage]> = [];
    const subs = Object.values(CHANNEL_NAMES).map((name) => {
      const fn = (m: unknown) => seen.push([name, m as DecisionMessage]);
      diagnosticsChannel.subscribe(name, fn);
      return () => diagnosticsChannel.unsubscribe(name, fn);
    });
    try {
      const req = { id: 1 };
      publishDecision(refused(), req, 'api');
      publishDecision({ ...refused(), allowed: true, rejectedBy: [], dryRunRejectedBy: ['user'] }, req, 'api');
      publishDecision({ ...refused(), allowed: true, rejectedBy: [], delayMs: 5 }, req, 'api');
      publishStoreError(new Error('down'), req, 'api', 'allow');
      publishDecision(refused(), req, 'shadow', true);
      expect(seen.map(([n]) => n)).toEqual([
        'tollgate:decision',
        'tollgate:rejected',
        'tollgate:decision',
        'tollgate:dry-run',
        'tollgate:decision',
        'tollgate:delayed',
        'tollgate:store-error',
        'tollgate:decision',
        'tollgate:dry-run',
      ]);
      expect(seen[8]?.[1]).toMatchObject({ limiter: 'shadow', dryRun: true });
      expect(seen[1]?.[1].request).toBe(req);
      expect(seen[1]?.[1].limiter).toBe('api');
      expect(seen[6]?.[1]).toMatchObject({ action: 'allow', limiter: 'api' });
    } finally {
      for (const off of subs) off();
    }
  });
});

describe('the pieces both adapters send', () => {
  it("a store failure under 'deny' is a 503 reduced-capacity problem with Retry-After: 1", () => {
    const r = storeFailureRefusal();
    expect(r.status).toBe(503);
    expect(r.headers).toEqual([
      ['Cache-Control', 'no-store'],
      ['Retry-After', '1'],
    ]);
    expect(r.body.type).toBe(PROBLEM_REDUCED_CAPACITY);
  });

  it('a custom message goes as text when it is a string and as JSON otherwise', () => {
    expect([messageContentType('slow down'), messageText('slow down')]).toEqual(['text/plain; charset=utf-8', 'slow down']);
    expect([messageContentType({ error: 'x' }), messageText({ error: 'x' })]).toEqual(['application/json; charset=utf-8', '{"error":"x"}']);
  });
});
