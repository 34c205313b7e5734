import { constant, header, ip, normalizeAddress, type RequestLike, TollgateError, tenant, user } from '@tollgate/core';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { compileTrust, TRUST_PROXY_WARNING } from '../src/keys.js';

function req(remoteAddress: string | undefined, headers: Record<string, string | string[]> = {}): RequestLike {
  return { headers, socket: { remoteAddress } };
}

describe('normalizeAddress', () => {
  it('turns IPv4-mapped IPv6 into IPv4', () => {
    expect(normalizeAddress('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(normalizeAddress('::FFFF:c000:0201')).toBe('192.0.2.1');
  });
  it('writes IPv6 in RFC 5952 form and drops zone ids', () => {
    expect(normalizeAddress('2001:DB8:0:0:0:0:0:1')).toBe('2001:db8::1');
    expect(normalizeAddress('2001:0db8:0000:0000:0001:0000:0000:0001')).toBe('2001:db8::1:0:0:1');
    expect(normalizeAddress('fe80::1%eth0')).toBe('fe80::1');
  });
  it('refuses anything that is not a four-part IPv4 or an IPv6 address', () => {
    for (const bad of ['', 'unknown', '127.1', '0x7f.0.0.1', '256.1.1.1', '1.2.3.4.5', 'a'.repeat(200), '::ffff:1.2.3', '1.2.3.4 ']) {
      expect(normalizeAddress(bad), bad).toBeUndefined();
    }
  });
});

describe('ip() without trusted proxies', () => {
  it('keys on the socket address and ignores forwarding headers', () => {
    const key = ip();
    expect(key(req('203.0.113.9', { 'x-forwarded-for': '1.1.1.1', forwarded: 'for=1.1.1.1', 'x-real-ip': '1.1.1.1' }))).toBe('203.0.113.9');
    expect(key(req('::ffff:203.0.113.9'))).toBe('203.0.113.9');
  });
  it('groups IPv6 by /56 by default, by the given prefix, or not at all', () => {
    expect(ip()(req('2001:db8:aa:bb12:1:2:3:4'))).toBe('2001:db8:aa:bb00::/56');
    expect(ip()(req('2001:db8:aa:bbff::9'))).toBe('2001:db8:aa:bb00::/56');
    expect(ip({ ipv6Subnet: 64 })(req('2001:db8:aa:bb12:1:2:3:4'))).toBe('2001:db8:aa:bb12::/64');
    expect(ip({ ipv6Subnet: 60 })(req('2001:db8:aa:bb1f::1'))).toBe('2001:db8:aa:bb10::/60');
    expect(ip({ ipv6Subnet: false })(req('2001:db8:aa:bb12:1:2:3:4'))).toBe('2001:db8:aa:bb12:1:2:3:4');
  });
  it('gives one key to different spellings of one address', () => {
    const key = ip({ ipv6Subnet: false });
    expect(key(req('2001:DB8::0:1'))).toBe(key(req('2001:db8:0:0::1')));
    expect(key(req('fe80::1%eth0'))).toBe(key(req('fe80::1')));
  });
  it('keys a request without a socket address as "unknown"', () => {
    expect(ip()({ headers: {} })).toBe('unknown');
    expect(ip()(req('garbage'))).toBe('unknown');
  });
});

describe('ip() walking X-Forwarded-For', () => {
  it('with a hop count, trusts that many hops nearest the server', () => {
    const r = req('10.0.0.1', { 'x-forwarded-for': '6.6.6.6, 198.51.100.7, 10.0.0.2' });
    expect(ip({ trustProxy: 1 })(r)).toBe('10.0.0.2');
    expect(ip({ trustProxy: 2 })(r)).toBe('198.51.100.7');
    expect(ip({ trustProxy: 3 })(r)).toBe('6.6.6.6');
    expect(ip({ trustProxy: 9 })(r)).toBe('6.6.6.6');
  });
  it('with CIDRs and presets, the first untrusted address from the right is the client', () => {
    const key = ip({ trustProxy: 'loopback, 10.0.0.0/8' });
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '6.6.6.6, 198.51.100.7, 10.1.2.3' }))).toBe('198.51.100.7');
    expect(ip({ trustProxy: ['loopback', '10.0.0.0/8'] })(req('::1', { 'x-forwarded-for': '198.51.100.7' }))).toBe('198.51.100.7');
    expect(ip({ trustProxy: 'uniquelocal' })(req('fd00::1', { 'x-forwarded-for': '198.51.100.7' }))).toBe('198.51.100.7');
    expect(ip({ trustProxy: 'linklocal' })(req('169.254.0.9', { 'x-forwarded-for': '198.51.100.7' }))).toBe('198.51.100.7');
  });
  it('ignores the header when the socket peer is not trusted (a spoofed header changes nothing)', () => {
    expect(ip({ trustProxy: '10.0.0.0/8' })(req('198.51.100.7', { 'x-forwarded-for': '1.2.3.4' }))).toBe('198.51.100.7');
  });
  it('a malformed hop ends the walk at the last well-formed address', () => {
    const key = ip({ trustProxy: 'loopback, 10.0.0.0/8' });
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '6.6.6.6, evil, 10.0.0.2' }))).toBe('10.0.0.2');
    expect(key(req('127.0.0.1', { 'x-forwarded-for': 'not-an-ip' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '1.2.3.4,,' }))).toBe('127.0.0.1');
  });
  it('accepts ports and brackets as proxies write them, and normalises what it finds', () => {
    const key = ip({ trustProxy: 'loopback', ipv6Subnet: false });
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '198.51.100.7:5678' }))).toBe('198.51.100.7');
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '[2001:DB8::1]:443' }))).toBe('2001:db8::1');
    expect(key(req('127.0.0.1', { 'x-forwarded-for': '::ffff:198.51.100.7' }))).toBe('198.51.100.7');
    expect(key(req('127.0.0.1', { 'x-forwarded-for': 'fe80::1%25eth0' }))).toBe('fe80::1');
  });
  it('with a function, passes the normalised address and the hop index', () => {
    const seen: Array<[string, number]> = [];
    const key = ip({
      trustProxy: (addr, hop) => {
        seen.push([addr, hop]);
        return hop < 2;
      },
    });
    expect(key(req('::ffff:10.0.0.1', { 'x-forwarded-for': '198.51.100.7, 10.0.0.2' }))).toBe('198.51.100.7');
    expect(seen).toEqual([
      ['10.0.0.1', 0],
      ['10.0.0.2', 1],
      ['198.51.100.7', 2],
    ]);
  });
  it('looks at no more than maxHops entries of a huge header, in bounded time', () => {
    const header = (n: number) => Array.from({ length: n }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`).join(', ');
    const huge = header(10_000);
    const key = ip({ trustProxy: '10.0.0.0/8, loopback' });
    // Time against a header 100 times shorter, best of five (a busy machine slows both alike): a
    // reader that split the whole header would take about 100 times as long.
    const best = (h: string) => {
      let min = Number.POSITIVE_INFINITY;
      for (let round = 0; round < 5; round++) {
        const start = performance.now();
        for (let i = 0; i < 100; i++) key(req('127.0.0.1', { 'x-forwarded-for': h }));
        min = Math.min(min, performance.now() - start);
      }
      return min;
    };
    const short = best(header(100));
    expect(best(huge)).toBeLessThan(short * 10 + 5);
    // 32 hops looked at: the key is the last address seen, never the client-written leftmost one.
    expect(key(req('127.0.0.1', { 'x-forwarded-for': huge }))).toBe('10.38.240.1');
    const mb = `1.2.3.4${'9'.repeat(1_000_000)}`;
    expect(key(req('127.0.0.1', { 'x-forwarded-for': mb }))).toBe('127.0.0.1');
  });
  it('reads a single-value header only from a trusted peer', () => {
    const key = ip({ trustProxy: 'loopback', header: 'CF-Connecting-IP' });
    expect(key(req('127.0.0.1', { 'cf-connecting-ip': '198.51.100.7' }))).toBe('198.51.100.7');
    expect(key(req('198.51.100.9', { 'cf-connecting-ip': '1.2.3.4' }))).toBe('198.51.100.9');
    expect(key(req('127.0.0.1', { 'cf-connecting-ip': '1.2.3.4, 5.6.7.8' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { 'cf-connecting-ip': 'attacker-chosen' }))).toBe('127.0.0.1');
  });
});

describe('ip() walking RFC 7239 Forwarded', () => {
  const key = ip({ trustProxy: 'loopback, 10.0.0.0/8', header: 'forwarded', ipv6Subnet: false });
  it('reads for= nodes right to left, with quoted IPv6 and ports', () => {
    expect(key(req('127.0.0.1', { forwarded: 'for=198.51.100.7;proto=https, for=10.0.0.2' }))).toBe('198.51.100.7');
    expect(key(req('127.0.0.1', { forwarded: 'For="[2001:db8:cafe::17]:4711"' }))).toBe('2001:db8:cafe::17');
    expect(key(req('127.0.0.1', { forwarded: 'for="198.51.100.7:8080";by=10.0.0.1' }))).toBe('198.51.100.7');
  });
  it('unknown and obfuscated nodes end the walk', () => {
    expect(key(req('127.0.0.1', { forwarded: 'for=6.6.6.6, for=unknown, for=10.0.0.2' }))).toBe('10.0.0.2');
    expect(key(req('127.0.0.1', { forwarded: 'for=6.6.6.6, for=_hidden' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { forwarded: 'proto=https' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { forwarded: 'for="unterminated' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { forwarded: 'for=[2001:db8::1]' }))).toBe('127.0.0.1');
  });
  it('bug: an element with a repeated parameter (for=6.6.6.6;for=198.51.100.7) was accepted, taking the last value', () => {
    // RFC 7239 section 4: such an element is malformed, so the walk ends at the last hop before it.
    expect(key(req('127.0.0.1', { forwarded: 'for=6.6.6.6;for=198.51.100.7' }))).toBe('127.0.0.1');
    expect(key(req('127.0.0.1', { forwarded: 'for=6.6.6.6;FOR=198.51.100.7, for=10.0.0.2' }))).toBe('10.0.0.2');
    expect(key(req('127.0.0.1', { forwarded: 'for=198.51.100.7;proto=http;proto=https' }))).toBe('127.0.0.1');
    // A ';' inside a quoted value is not a separator: one pair each, well formed.
    expect(key(req('127.0.0.1', { forwarded: 'by="a;b";for=198.51.100.7' }))).toBe('198.51.100.7');
    expect(key(req('127.0.0.1', { forwarded: 'by="a\\";for=6.6.6.6";for=198.51.100.7' }))).toBe('198.51.100.7');
  });
  it('stays bounded on huge values', () => {
    const huge = Array.from({ length: 10_000 }, () => 'for=10.0.0.3').join(', ');
    const start = performance.now();
    for (let i = 0; i < 100; i++) key(req('127.0.0.1', { forwarded: huge }));
    expect(performance.now() - start).toBeLessThan(500);
    expect(key(req('127.0.0.1', { forwarded: `for="${'x'.repeat(1_000_000)}"` }))).toBe('127.0.0.1');
  });
});

describe('trustProxy validation', () => {
  it('rejects what it cannot understand at construction', () => {
    for (const bad of [-1, 1.5, 'not-an-ip', '10.0.0.0/99', ['loopback', ''], {}, '']) {
      let err: unknown;
      try {
        ip({ trustProxy: bad as never });
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(bad)).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe('TG_INVALID_TRUST_PROXY');
    }
  });
  it('rejects bad ip() options', () => {
    expect(() => ip({ ipv6Subnet: 0 })).toThrow(/ipv6Subnet/);
    expect(() => ip({ ipv6Subnet: 129 })).toThrow(/ipv6Subnet/);
    expect(() => ip({ header: 'bad header' })).toThrow(/header/);
    expect(() => ip({ trustProxy: 1, bogus: 1 } as never)).toThrow(/bogus/);
  });
  it('warns once, with a code, when every hop is trusted', () => {
    // Each test file runs in its own process, so no earlier `true` has warned yet.
    const spy = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    compileTrust(true);
    compileTrust(true);
    const calls = spy.mock.calls.filter((c) => (c[1] as { code?: string } | undefined)?.code === TRUST_PROXY_WARNING);
    expect(calls).toHaveLength(1);
    spy.mockRestore();
    // And `true` does trust every hop.
    expect(ip({ trustProxy: true })(req('198.51.100.1', { 'x-forwarded-for': '6.6.6.6' }))).toBe('6.6.6.6');
  });
});

describe('other extractors', () => {
  it('header() reads a header, absent or empty means "does not apply"', () => {
    const key = header('X-API-Key');
    expect(key(req('1.1.1.1', { 'x-api-key': 'k1' }))).toBe('k1');
    expect(key(req('1.1.1.1', { 'x-api-key': '' }))).toBeUndefined();
    expect(key(req('1.1.1.1'))).toBeUndefined();
  });
  it('user() and tenant() coerce ids and drop missing ones', () => {
    const u = user((r: { id?: unknown }) => r.id);
    expect(u({ id: 'alice' })).toBe('alice');
    expect(u({ id: 42 })).toBe('42');
    expect(u({ id: '' })).toBeUndefined();
    expect(u({})).toBeUndefined();
    // An object is a bug (the user instead of its id): a coded error, never the rule switched off.
    expect(() => u({ id: { toString: () => 'x' } })).toThrow(expect.objectContaining({ code: 'TG_INVALID_CALLBACK_RESULT' }));
    expect(tenant((r: { org: string }) => r.org)({ org: 'acme' })).toBe('acme');
    expect(() => user('x' as never)).toThrow(TollgateError);
  });
  it('constant() is the same for every request', () => {
    expect(constant('global')()).toBe('global');
    expect(() => constant('')).toThrow(TollgateError);
  });
});

describe('property: a client can never choose a key that is not an address', () => {
  const alphabet = fc.constantFrom(
    ...'0123456789abcdef.:,;=[]"% _-xunknowFORf'.split(''),
    'for=',
    ', ',
    '::ffff:',
    '1.2.3.4',
    '2001:db8::',
  );
  const junk = fc.array(alphabet, { maxLength: 80 }).map((parts) => parts.join(''));
  const isAddressKey = (k: string) => {
    if (k === 'unknown') return false;
    const [addr, bits, ...rest] = k.split('/');
    return rest.length === 0 && normalizeAddress(addr as string) === addr && (bits === undefined || bits === '56');
  };
  it('without trusted proxies the key is the socket address, whatever the headers say', () => {
    const key = ip();
    fc.assert(
      fc.property(
        junk,
        junk,
        (xff, fwd) => key(req('198.51.100.77', { 'x-forwarded-for': xff, forwarded: fwd, 'x-real-ip': xff })) === '198.51.100.77',
      ),
    );
  });
  it('behind a trusted proxy the key is always a normalised address (or its /56)', () => {
    const keys = [
      ip({ trustProxy: 'loopback' }),
      ip({ trustProxy: true }),
      ip({ trustProxy: 'loopback', header: 'forwarded' }),
      ip({ trustProxy: 3 }),
    ];
    fc.assert(
      fc.property(junk, (value) => {
        for (const key of keys) {
          const k = key(req('127.0.0.1', { 'x-forwarded-for': value, forwarded: value }));
          if (!isAddressKey(k)) return false;
        }
        return true;
      }),
      { numRuns: 2000 },
    );
  });
});

describe('ip() per-socket memo (untrusted path)', () => {
  it('keys every request of one connection alike and different connections apart, and never caches "unknown"', () => {
    const key = ip();
    const a = { remoteAddress: '::ffff:198.51.100.7' };
    const b = { remoteAddress: '2001:db8:aa:bb01::1' };
    const gone: { remoteAddress?: string } = {};
    expect(key({ headers: {}, socket: a })).toBe('198.51.100.7');
    expect(key({ headers: { 'x-forwarded-for': '203.0.113.1' }, socket: a })).toBe('198.51.100.7');
    expect(key({ headers: {}, socket: b })).toBe('2001:db8:aa:bb00::/56');
    expect(key({ headers: {}, socket: gone })).toBe('unknown');
    gone.remoteAddress = '192.0.2.9';
    expect(key({ headers: {}, socket: gone })).toBe('192.0.2.9');
    // Another ip() (other options) has its own memo.
    expect(ip({ ipv6Subnet: false })({ headers: {}, socket: b })).toBe('2001:db8:aa:bb01::1');
  });
});
