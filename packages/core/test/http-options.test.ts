/**
 * The shared HTTP adapter options (SPEC 9, 13): one validation for Express and Fastify,
 * whose errors carry the adapter's own name and signatures.
 */
import { ManualClock, ManualTimers, type RequestLike, TollgateError } from '@tollgate/core';
import { checkOptionNames, type HttpOptionsWording, normalizeHttpOptions, splitClientAddress } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

const WORDING: HttpOptionsWording = {
  path: 'adapter',
  handler: 'handler shape',
  skip: 'skip shape',
  onRejected: 'onRejected shape',
  onStoreError: 'onStoreError shape',
  message: 'message shape',
};

function failure(options: object): TollgateError {
  try {
    normalizeHttpOptions(options, WORDING);
  } catch (err) {
    expect(err).toBeInstanceOf(TollgateError);
    return err as TollgateError;
  }
  throw new Error('expected a configuration error');
}

describe('normalizeHttpOptions', () => {
  it('applies the defaults', () => {
    const o = normalizeHttpOptions<RequestLike, object>({}, WORDING);
    expect(o.statusCode).toBe(429);
    expect(o.dryRun).toBe(false);
    expect(o.onStoreError).toBe('allow');
    expect(o.name).toBe('rateLimit');
    expect(o.message).toBeUndefined();
    expect(o.timers).toBeUndefined();
    expect(o.pk).toBe(false);
    expect(o.format).toBeTypeOf('function');
    expect(o.defaultKey({ headers: {}, socket: { remoteAddress: '203.0.113.7' } })).toContain('203.0.113.7');
  });

  it('turns a constant message into a function returning it, and keeps a function as given', () => {
    const body = { error: 'slow down' };
    expect(normalizeHttpOptions({ message: body }, WORDING).message?.({}, {} as never)).toBe(body);
    const f = () => 'no';
    expect(normalizeHttpOptions({ message: f }, WORDING).message).toBe(f);
  });

  it('keeps headers: false, the partition key and the timers', () => {
    const timers = new ManualTimers(new ManualClock());
    const o = normalizeHttpOptions({ headers: false, partitionKey: { salt: 's' }, timers }, WORDING);
    expect(o.format).toBeUndefined();
    expect(o.pk).toBe(true);
    expect(o.timers).toBe(timers);
  });

  it.each([
    [{ statusCode: 200 }, 'adapter.statusCode', 'an HTTP error status from 400 to 599'],
    [{ dryRun: 'yes' }, 'adapter.dryRun', 'true or false'],
    [{ name: '' }, 'adapter.name', 'a non-empty string'],
    [{ timers: {} }, 'adapter.timers', 'an object with setTimeout(fn, ms) and clearTimeout(handle)'],
    [{ onStoreError: 'ignore' }, 'adapter.onStoreError', 'onStoreError shape'],
    [{ message: 42 }, 'adapter.message', 'message shape'],
    [{ handler: 'x' }, 'adapter.handler', 'handler shape'],
    [{ skip: true }, 'adapter.skip', 'skip shape'],
    [{ onRejected: {} }, 'adapter.onRejected', 'onRejected shape'],
  ])('rejects %j at the adapter path with the adapter wording', (options, path, expected) => {
    const err = failure(options);
    expect(err.code).toBe('TG_INVALID_OPTION');
    expect(err.path).toBe(path);
    expect(err.expected).toBe(expected);
    expect(err.fix).toBeTruthy();
  });

  it('gives the adapter fix for invalid timers', () => {
    expect(failure({ timers: { setTimeout() {} } }).fix).toMatch(/ManualTimers\(clock\)/);
  });
});

describe('splitClientAddress', () => {
  it('takes trustProxy and ipv6Subnet out and builds the default key from them', () => {
    const [rest, key] = splitClientAddress<RequestLike, { window: string; trustProxy: number; ipv6Subnet: number }>({
      window: '1m',
      trustProxy: 1,
      ipv6Subnet: 64,
    });
    expect(rest).toEqual({ window: '1m' });
    const via = (addr: string) => ({ headers: { 'x-forwarded-for': addr }, socket: { remoteAddress: '10.0.0.1' } });
    // One trusted hop: the forwarded address is the client, grouped by its /64.
    expect(key(via('2001:db8:1:2:aaaa::1'))).toBe(key(via('2001:db8:1:2:bbbb::2')));
    expect(key(via('2001:db8:1:3::1'))).not.toBe(key(via('2001:db8:1:2::1')));
  });
});

describe('checkOptionNames', () => {
  const known = new Set(['rules', 'store']);
  const fixes = { notObject: 'pass an object', unknown: (name: string) => `not ${name}` };

  it('accepts an object naming known options only', () => {
    expect(() => checkOptionNames({ rules: [] }, 'adapter', known, fixes)).not.toThrow();
  });

  it('rejects a non-object and an unknown name, listing the known ones in order', () => {
    expect(() => checkOptionNames(null, 'adapter', known, fixes)).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION', path: 'adapter', fix: 'pass an object' }),
    );
    expect(() => checkOptionNames({ rules: [], max: 5 }, 'adapter', known, fixes)).toThrow(
      expect.objectContaining({
        code: 'TG_UNKNOWN_OPTION',
        path: 'adapter.max',
        expected: 'one of rules, store',
        received: '"max"',
        fix: 'not max',
      }),
    );
  });
});
