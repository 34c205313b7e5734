/**
 * Allow and deny lists of a limiter, compiled once at construction: addresses and CIDRs
 * (IPv4 and IPv6, parsed with ipaddr.js) matched on the client address the default `ip()`
 * key finds with the limiter's own `trustProxy` (a forwarding header counts only when a
 * trusted proxy wrote it), or a function of the request returning a boolean or a promise
 * of one.
 *
 * The deny list is asked first: a request on both lists is denied. A denied request is
 * answered 403 without a store call; an allowed one bypasses the rules (nothing counted),
 * as `skip` does.
 */
import ipaddr from 'ipaddr.js';
import { callbackResultError } from '../app-errors.js';
import { configError, describe } from '../errors.js';
import { clientAddress, normalizeAddress, type RequestLike, type TrustProxy } from '../keys.js';
import { PROBLEM_CONTENT_TYPE, type Refusal } from '../response.js';
import { call, settle } from './callbacks.js';

/**
 * Who a list names: addresses and CIDRs (an array, or one comma-separated string), or a
 * function of the request.
 * @example allow: ['10.0.0.0/8', '2001:db8::/32', '203.0.113.7']
 * @example deny: async (req) => blocked.has(await accountOf(req))
 */
export type AccessList<Req> = string | readonly string[] | ((req: Req) => boolean | Promise<boolean>);

/** A compiled list: is this request on it? (A boolean, or a promise of one for a function list.) */
type Matcher<Req> = (req: Req, address: () => string | undefined) => unknown;

/** What the lists say about a request: `'deny'`, `'allow'`, or `undefined` (on neither). */
export type Verdict = 'allow' | 'deny' | undefined;

/** Decides a request's verdict, calling `then` at once when no promise is involved. */
export type Access<Req> = (req: Req, then: (verdict: Verdict) => void, fail: (err: unknown) => void) => void;

const V4_BITS = 32;
const V6_BITS = 128;
const MAPPED_BITS = 96;

interface Ranges {
  /** IPv4 networks as [network, mask], 32-bit unsigned. */
  v4: Array<[number, number]>;
  /** IPv6 networks as [address, prefix length]. */
  v6: Array<[ipaddr.IPv6, number]>;
}

function v4Int(a: ipaddr.IPv4): number {
  const o = a.octets;
  return (((o[0] as number) << 24) | ((o[1] as number) << 16) | ((o[2] as number) << 8) | (o[3] as number)) >>> 0;
}

function v4Mask(bits: number): number {
  return bits === 0 ? 0 : (0xffffffff << (V4_BITS - bits)) >>> 0;
}

function badEntry(path: string, entry: unknown, why: string): Error {
  return configError('TG_INVALID_OPTION', {
    path,
    expected: 'an IPv4 or IPv6 address or CIDR, such as 203.0.113.7, 10.0.0.0/8 or 2001:db8::/32',
    received: `${describe(entry)}${why === '' ? '' : ` (${why})`}`,
    fix: 'Write each entry as an address or address/prefix-length; for anything else pass a function (req) => boolean.',
  });
}

/** One entry into `ranges`; IPv4-mapped IPv6 (`::ffff:10.0.0.0/104`) becomes the IPv4 range. */
function addEntry(ranges: Ranges, entry: unknown, path: string): void {
  if (typeof entry !== 'string') throw badEntry(path, entry, '');
  const text = entry.trim();
  const slash = text.indexOf('/');
  const addrText = slash === -1 ? text : text.slice(0, slash);
  const norm = normalizeAddress(addrText);
  if (norm === undefined) throw badEntry(path, entry, text === '' ? 'empty' : 'not an address');
  const v6 = norm.indexOf(':') !== -1;
  const mapped = !v6 && addrText.indexOf(':') !== -1;
  const max = v6 || mapped ? V6_BITS : V4_BITS;
  let bits = max;
  if (slash !== -1) {
    const b = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(b) || Number(b) > max) throw badEntry(path, entry, `prefix length must be 0 to ${max}`);
    bits = Number(b);
  }
  if (mapped) {
    if (bits < MAPPED_BITS) throw badEntry(path, entry, 'an IPv4-mapped range needs a prefix of at least 96; write the IPv4 range');
    bits -= MAPPED_BITS;
  }
  if (v6) ranges.v6.push([ipaddr.IPv6.parse(norm), bits]);
  else {
    const mask = v4Mask(bits);
    ranges.v4.push([(v4Int(ipaddr.IPv4.parse(norm)) & mask) >>> 0, mask]);
  }
}

/** Is a normalised address (IPv4 dotted, or RFC 5952 IPv6) in one of `ranges`? */
function inRanges(ranges: Ranges, addr: string): boolean {
  if (addr.indexOf(':') === -1) {
    if (ranges.v4.length === 0) return false;
    const n = v4Int(ipaddr.IPv4.parse(addr));
    for (const [net, mask] of ranges.v4) if ((n & mask) >>> 0 === net) return true;
    return false;
  }
  if (ranges.v6.length === 0) return false;
  const a = ipaddr.IPv6.parse(addr);
  for (const [net, bits] of ranges.v6) if (a.match(net, bits)) return true;
  return false;
}

function compileList<Req>(value: unknown, path: string): Matcher<Req> | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'function') {
    const fn = value as (req: Req) => unknown;
    return (req) => call(fn, req);
  }
  const entries = typeof value === 'string' ? value.split(',') : Array.isArray(value) ? (value as unknown[]) : undefined;
  if (entries === undefined) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'addresses or CIDRs (an array, or a comma-separated string), or a function (req) => boolean',
      received: describe(value),
      fix: "Write e.g. ['10.0.0.0/8', '2001:db8::/32'].",
    });
  }
  const ranges: Ranges = { v4: [], v6: [] };
  for (const [i, e] of entries.entries()) addEntry(ranges, e, typeof value === 'string' ? path : `${path}[${i}]`);
  return (_req, address) => {
    const addr = address();
    return addr !== undefined && inRanges(ranges, addr);
  };
}

function asBoolean(path: string): (v: unknown) => boolean {
  return (v) => {
    if (v === true || v === false) return v;
    throw callbackResultError(path, 'true or false (or a promise of one)', v, 'Return a boolean: true puts the request on the list.');
  };
}

/**
 * Compiles a limiter's `allow` and `deny` options; `undefined` when it has neither, so a
 * limiter without lists does no work for them at all.
 * @example const access = compileAccess(options.allow, options.deny, { path: 'rateLimit', trustProxy: 'loopback' })
 */
export function compileAccess<Req>(
  allow: unknown,
  deny: unknown,
  o: { path: string; trustProxy?: TrustProxy | undefined },
): Access<Req> | undefined {
  const denied = compileList<Req>(deny, `${o.path}.deny`);
  const allowed = compileList<Req>(allow, `${o.path}.allow`);
  if (denied === undefined && allowed === undefined) return undefined;
  const addressOf = clientAddress({ trustProxy: o.trustProxy });
  const checkDeny = asBoolean(`${o.path}.deny`);
  const checkAllow = asBoolean(`${o.path}.allow`);

  return function access(req, then, fail) {
    let known = false;
    let addr: string | undefined;
    const address = () => {
      if (!known) {
        addr = addressOf(req as unknown as RequestLike);
        known = true;
      }
      return addr;
    };
    const askAllow = () => {
      if (allowed === undefined) return then(undefined);
      let r: unknown;
      try {
        r = allowed(req, address);
      } catch (err) {
        return fail(err);
      }
      settle(r, checkAllow, (yes) => then(yes ? 'allow' : undefined), fail);
    };
    if (denied === undefined) return askAllow();
    let r: unknown;
    try {
      r = denied(req, address);
    } catch (err) {
      return fail(err);
    }
    settle(r, checkDeny, (yes) => (yes ? then('deny') : askAllow()), fail);
  };
}

/** The 403 problem body of a denied request (RFC 9457; no registered type fits, so `about:blank`). */
export function deniedRefusal(): Refusal {
  return {
    status: 403,
    headers: [['Cache-Control', 'no-store']],
    body: { type: 'about:blank', title: 'Forbidden', status: 403, detail: 'This client is not allowed to use this service.' },
    contentType: PROBLEM_CONTENT_TYPE,
    retryAfter: undefined,
  };
}
