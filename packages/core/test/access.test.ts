/**
 * `compileAccess`: the allow and deny lists every limiter port shares, on the request
 * shape Node gives (socket address and headers). The HTTP scenarios run the same lists
 * through Express, Fastify and node:http; this pins the address matching at its edges.
 */
import { compileAccess, type Verdict } from '@tollgate/core/http';
import { describe, expect, it } from 'vitest';

type Req = { headers: Record<string, string>; socket: { remoteAddress?: string } };
const from = (remoteAddress: string | undefined, headers: Record<string, string> = {}): Req => ({
  headers,
  socket: remoteAddress === undefined ? {} : { remoteAddress },
});

function verdict(access: ReturnType<typeof compileAccess<Req>>, req: Req): Verdict | 'error' {
  let out: Verdict | 'error' = 'error';
  (access as NonNullable<typeof access>)(
    req,
    (v) => {
      out = v;
    },
    () => {
      out = 'error';
    },
  );
  return out;
}

describe('compileAccess', () => {
  it('no lists: nothing compiled, nothing to run per request', () => {
    expect(compileAccess(undefined, undefined, { path: 'rateLimit' })).toBeUndefined();
  });

  it('IPv4 prefixes at their edges, /0 and /32', () => {
    const a = compileAccess<Req>(['10.1.2.0/23', '192.0.2.7/32'], ['0.0.0.0/0'], { path: 'x' });
    // Everything IPv4 is denied (deny first); IPv6 is on neither list.
    expect(verdict(a, from('10.1.2.1'))).toBe('deny');
    expect(verdict(a, from('2001:db8::1'))).toBeUndefined();
    const b = compileAccess<Req>(['10.1.2.0/23', '192.0.2.7/32'], undefined, { path: 'x' });
    expect(['10.1.1.255', '10.1.2.0', '10.1.3.255', '10.1.4.0', '192.0.2.7', '192.0.2.8'].map((ip) => verdict(b, from(ip)))).toEqual([
      undefined,
      'allow',
      'allow',
      undefined,
      'allow',
      undefined,
    ]);
    // Host bits in a CIDR are ignored, as in a routing table.
    const c = compileAccess<Req>(['10.9.9.9/8'], undefined, { path: 'x' });
    expect(verdict(c, from('10.200.0.1'))).toBe('allow');
  });

  it('IPv6 prefixes, zone ids, and IPv4-mapped addresses on both sides', () => {
    const a = compileAccess<Req>(['2001:db8:abcd:12::/63', '::ffff:198.51.100.0/120', 'fe80::1%eth0'], undefined, { path: 'x' });
    const cases: Array<[string, Verdict]> = [
      ['2001:db8:abcd:12::1', 'allow'],
      ['2001:db8:abcd:13:ffff::1', 'allow'],
      ['2001:db8:abcd:14::', undefined],
      ['198.51.100.255', 'allow'],
      ['::ffff:198.51.100.3', 'allow'],
      ['198.51.101.0', undefined],
      ['fe80::1%lo', 'allow'],
      ['fe80::2', undefined],
    ];
    for (const [ip, want] of cases) expect(verdict(a, from(ip)), ip).toBe(want);
  });

  it('the forwarded client counts only from a trusted peer; a socket without an address is on no list', () => {
    const untrusted = compileAccess<Req>(['203.0.113.7'], undefined, { path: 'x' });
    expect(verdict(untrusted, from('127.0.0.1', { 'x-forwarded-for': '203.0.113.7' }))).toBeUndefined();
    const trusted = compileAccess<Req>(['203.0.113.7'], undefined, { path: 'x', trustProxy: 'loopback' });
    expect(verdict(trusted, from('127.0.0.1', { 'x-forwarded-for': '203.0.113.7' }))).toBe('allow');
    expect(verdict(trusted, from('10.0.0.1', { 'x-forwarded-for': '203.0.113.7' }))).toBeUndefined();
    expect(verdict(trusted, from(undefined, { 'x-forwarded-for': '203.0.113.7' }))).toBeUndefined();
    const denyAll = compileAccess<Req>(undefined, ['0.0.0.0/0', '::/0'], { path: 'x' });
    expect(verdict(denyAll, from(undefined))).toBeUndefined();
  });

  it('function lists: a non-boolean or a throw fails, never a verdict', () => {
    const a = compileAccess<Req>(
      (req: Req) =>
        req.headers.v === 'throw'
          ? (() => {
              throw new Error('bug');
            })()
          : (req.headers.v as never),
      undefined,
      { path: 'x' },
    );
    expect(verdict(a, from('192.0.2.1', { v: 'yes' }))).toBe('error');
    expect(verdict(a, from('192.0.2.1', { v: 'throw' }))).toBe('error');
  });
});
