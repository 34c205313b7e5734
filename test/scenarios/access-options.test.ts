/**
 * The `allow` and `deny` options at construction, on every port: an entry that is not an
 * address or CIDR fails at once with a coded error naming the entry and a fix; a list of
 * the wrong type too. (Request-time behaviour: the shared scenarios, `allow and deny lists`.)
 */
import { TollgateError } from '@tollgate/core';
import { rateLimit as expressRateLimit, slowDown as expressSlowDown } from '@tollgate/express';
import tollgate, { concurrencyHook as fastifyConcurrencyHook } from '@tollgate/fastify';
import { concurrency as nodeConcurrency, rateLimit as nodeRateLimit } from '@tollgate/node';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';

const rules = [{ name: 'ip', rate: '10/min' }] as const;

const bad: Array<[options: Record<string, unknown>, path: string, received: RegExp]> = [
  [{ allow: ['10.0.0.0/33'] }, 'allow[0]', /prefix length must be 0 to 32/],
  [{ allow: ['10.0.0.1', '2001:db8::/129'] }, 'allow[1]', /prefix length must be 0 to 128/],
  [{ deny: ['10.0.0.0/8', 'example.com'] }, 'deny[1]', /not an address/],
  [{ deny: '10.0.0.0/8, ' }, 'deny', /empty/],
  [{ deny: ['127.1'] }, 'deny[0]', /not an address/],
  [{ allow: ['::ffff:0:0/95'] }, 'allow[0]', /at least 96/],
  [{ allow: [42] }, 'allow[0]', /42/],
  [{ deny: 42 }, 'deny', /42/],
];

function expectCoded(make: () => unknown, root: string, path: string, received: RegExp): void {
  let thrown: unknown;
  try {
    make();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(TollgateError);
  const e = thrown as TollgateError;
  expect(e.code).toBe('TG_INVALID_OPTION');
  expect(e.path).toBe(`${root}.${path}`);
  expect(e.received).toMatch(received);
  expect(e.fix).toBeTruthy();
}

describe('allow and deny lists: invalid entries fail at construction', () => {
  for (const [options, path, received] of bad) {
    const label = JSON.stringify(options);
    it(`Express rateLimit ${label}`, () => {
      expectCoded(() => expressRateLimit({ rules: [...rules], ...options }), 'rateLimit', path, received);
    });
    it(`node rateLimit ${label}`, () => {
      expectCoded(() => nodeRateLimit({ rules: [...rules], ...options }), 'rateLimit', path, received);
    });
    it(`Fastify plugin ${label}`, async () => {
      const app = Fastify();
      app.register(tollgate, { rules: [...rules], ...options });
      const err = await app.ready().then(
        () => undefined,
        (e: unknown) => e,
      );
      await app.close().catch(() => {});
      expectCoded(
        () => {
          throw err;
        },
        'tollgate',
        path,
        received,
      );
    });
  }

  it('the controls validate their allow lists the same way', () => {
    expectCoded(() => expressSlowDown({ window: '10s', delayAfter: 1, allow: ['10.0.0.0/40'] }), 'slowDown', 'allow[0]', /0 to 32/);
    expectCoded(() => nodeConcurrency({ max: 1, allow: 'nope' }), 'concurrency', 'allow', /not an address/);
    expect(() => fastifyConcurrencyHook({ max: 1, allow: ['10.0.0.0/8'] })).not.toThrow();
  });

  it('valid lists of every shape are accepted', () => {
    expect(() =>
      expressRateLimit({
        rules: [...rules],
        allow: ['10.0.0.0/8', '203.0.113.7', '2001:db8::/32', '::ffff:192.0.2.0/120', 'fe80::1%eth0', '0.0.0.0/0'],
        deny: '198.51.100.0/24, 2001:db8:dead::/48',
      }),
    ).not.toThrow();
  });
});
