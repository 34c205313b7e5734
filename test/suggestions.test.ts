/**
 * Errors that point to the fix: every options check of every package names the option as
 * the user wrote it and suggests the known spelling nearest to it (one shared helper,
 * `closest` in @tollgate/core), through each package's public constructor.
 */
import { createFetch } from '@tollgate/client';
import { closest, createLimiter, editDistance, ip, MemoryStore, type TollgateError, unknownOptionFix } from '@tollgate/core';
import { rateLimit, slowDown } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { tollgateMetrics } from '@tollgate/otel';
import { RedisStore } from '@tollgate/redis';
import fc from 'fast-check';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';

function thrown(fn: () => unknown): { code: string; message: string; fix?: string | undefined } {
  try {
    fn();
  } catch (err) {
    return err as TollgateError;
  }
  throw new Error('expected an error');
}

describe('the suggestion helper', () => {
  it('counts insertions, deletions, substitutions and swaps, ignoring case and _ / -', () => {
    expect(editDistance('window', 'window')).toBe(0);
    expect(editDistance('windw', 'window')).toBe(1);
    expect(editDistance('wnidow', 'window')).toBe(1);
    expect(editDistance('windoww', 'window')).toBe(1);
    expect(editDistance('BlockFor', 'blockFor')).toBe(0);
    expect(editDistance('token_bucket', 'token-bucket')).toBe(0);
    expect(editDistance('abc', 'xyz')).toBe(3);
  });

  it('a name with one slip (a letter changed, dropped, added or two swapped) is answered with a name that near', () => {
    const known = ['window', 'limit', 'algorithm', 'blockFor', 'countRejected', 'skipSuccessful', 'trustProxy', 'ipv6Subnet'];
    const slip = fc.tuple(fc.constantFrom(...known), fc.nat(), fc.constantFrom('change', 'drop', 'add', 'swap'), fc.constantFrom(...'qxz'));
    fc.assert(
      fc.property(slip, ([name, at, kind, letter]) => {
        const i = at % (name.length - 1);
        const typo =
          kind === 'change'
            ? `${name.slice(0, i)}${letter}${name.slice(i + 1)}`
            : kind === 'drop'
              ? `${name.slice(0, i)}${name.slice(i + 1)}`
              : kind === 'add'
                ? `${name.slice(0, i)}${letter}${name.slice(i)}`
                : `${name.slice(0, i)}${name[i + 1]}${name[i]}${name.slice(i + 2)}`;
        const near = closest(typo, known);
        expect(near, typo).toBeDefined();
        expect(editDistance(typo, near as string), typo).toBeLessThanOrEqual(1);
      }),
    );
  });

  it('suggests only a near name, never a far one', () => {
    expect(closest('windowMs', ['window', 'limit'])).toBe('window');
    expect(closest('limt', ['window', 'limit'])).toBe('limit');
    expect(closest('max', ['window', 'limit'])).toBeUndefined();
    expect(closest(42, ['window'])).toBeUndefined();
    expect(unknownOptionFix('xyz', ['window'], 'Remove it.')).toBe('Remove it.');
  });
});

describe('messages name the option as written and the nearest known one', () => {
  it("algorithm: 'leaky-queue' → did you mean algorithm: 'leaky-bucket', mode: 'queue'?", () => {
    const err = thrown(() => createLimiter({ rules: [{ name: 'q', rate: '5/s', algorithm: 'leaky-queue' as 'leaky-bucket' }] }));
    expect(err.code).toBe('TG_UNKNOWN_ALGORITHM');
    expect(err.message).toContain('rules[0] "q".algorithm');
    expect(err.message).toContain('received "leaky-queue"');
    expect(err.fix).toMatch(/^Did you mean algorithm: 'leaky-bucket', mode: 'queue'\?/);
    for (const [written, meant] of [
      ['token_bucket', "algorithm: 'token-bucket'"],
      ['slidingwindow', "algorithm: 'sliding-window'"],
      ['fixed-windw', "algorithm: 'fixed-window'"],
      ['gcra', "algorithm: 'leaky-bucket', mode: 'meter'"],
    ]) {
      const e = thrown(() => createLimiter({ rules: [{ name: 'q', rate: '5/s', algorithm: written as 'leaky-bucket' }] }));
      expect(e.fix, written).toContain(`Did you mean ${meant}?`);
    }
  });

  it('a rule option, the limiter, the memory store, ip() and the enum values each suggest their nearest name', () => {
    const cases: [() => unknown, string, string][] = [
      [() => createLimiter({ rules: [{ name: 'r', limit: 1, window: '1s', windw: 1 } as never] }), 'rules[0].windw', "'window'"],
      [() => createLimiter({ rules: [{ name: 'r', rate: '1/s', blockfor: '1m' } as never] }), 'rules[0].blockfor', "'blockFor'"],
      [() => createLimiter({ rules: [{ name: 'r', rate: '1/s' }], prefx: 'x' } as never), 'createLimiter.prefx', "'prefix'"],
      [() => new MemoryStore({ maxKey: 5 } as never), 'MemoryStore.maxKey', "'maxKeys'"],
      [() => ip({ trustProxys: true } as never), 'ip.trustProxys', "'trustProxy'"],
      [
        () => createLimiter({ rules: [{ name: 'r', rate: '1/s', algorithm: 'fixed-window', align: 'first' as 'clock' }] }),
        'align',
        "'first-request'",
      ],
      [() => createLimiter({ rules: [{ name: 'r', rate: '1/s', algorithm: 'leaky-bucket', mode: 'queu' as 'queue' }] }), 'mode', "'queue'"],
      [() => createLimiter({ rules: [{ name: 'r', quota: 5, per: 'months' as 'month' }] }), 'per', "'month'"],
      [() => createLimiter({ rules: [{ name: 'r', rate: '10/sek' as '10/sec' }] }), 'rate', "'10/sec'"],
      [() => createLimiter({ rules: [{ name: 'r', limit: 1, window: '15 minuts' as '15m' }] }), 'window', "'15 minutes'"],
    ];
    for (const [fn, path, near] of cases) {
      const err = thrown(fn);
      expect(err.message, path).toContain(path);
      expect(err.fix, path).toContain(`Did you mean ${near}?`);
    }
  });

  it('the Express and Fastify adapters, slowDown, RedisStore and the client suggest too', async () => {
    const cases: [() => unknown, string, string][] = [
      [() => rateLimit({ rule: [] } as never), 'rateLimit.rule', "'rules'"],
      [() => rateLimit({ rules: [{ name: 'r', rate: '1/s' }], header: 'legacy' } as never), 'rateLimit.header', "'headers'"],
      [() => rateLimit({ rules: [{ name: 'r', rate: '1/s' }], headers: 'draft10' as 'draft-10' }), 'headers', "'draft-10'"],
      [() => rateLimit({ rules: [{ name: 'r', rate: '1/s' }] }).route({ rule: [] } as never), 'route.rule', "'rules'"],
      [() => slowDown({ window: '1m', delayAfter: 1, maxDelayMs: 5 } as never), 'slowDown.maxDelayMs', "'maxDelay'"],
      [() => new RedisStore({ client: {}, timeoutMS: 5 } as never), 'RedisStore.timeoutMS', "'timeoutMs'"],
      [() => createFetch({ retrys: 3 } as never), 'createFetch.retrys', "'retries'"],
      [() => tollgateMetrics({ meterProvidr: {} } as never), 'tollgateMetrics.meterProvidr', "'meterProvider'"],
    ];
    for (const [fn, path, near] of cases) {
      const err = thrown(fn);
      expect(err.message, path).toContain(path);
      expect(err.fix, path).toContain(`Did you mean ${near}?`);
    }
    const app = Fastify();
    const registered = app.register(tollgate, { rules: [{ name: 'r', rate: '1/s' }], trustProxi: true } as never);
    const err = (await registered.ready().then(
      () => undefined,
      (e: unknown) => e,
    )) as TollgateError;
    expect(err.message).toContain('tollgate.trustProxi');
    expect(err.fix).toContain("Did you mean 'trustProxy'?");
    await app.close();
  });
});
