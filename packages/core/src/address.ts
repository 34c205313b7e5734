/**
 * IP address text: normalised (IPv4-mapped IPv6 to IPv4, zone ids dropped, RFC 5952
 * text) and IPv6 grouped by a prefix length (default /56: one home or site), so one
 * client has one key however its address is written.
 */
import ipaddr from 'ipaddr.js';
import { configError, describe } from './errors.js';

/** The IPv6 prefix length clients are grouped by unless told otherwise. */
export const DEFAULT_SUBNET = 56;
/** Longer than any address with brackets, zone id and port a proxy would write. */
export const MAX_NODE_CHARS = 100;
const CANONICAL_V4 = /^(?:::ffff:)?((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})$/i;

/**
 * Normalises an address: IPv4-mapped IPv6 to IPv4, zone ids dropped, IPv6 in RFC 5952
 * form. Returns `undefined` for anything that is not an IP address (IPv4 must be four
 * decimal parts: `127.1` and `0x7f.0.0.1` are refused).
 */
export function normalizeAddress(addr: string): string | undefined {
  if (typeof addr !== 'string' || addr.length === 0 || addr.length > MAX_NODE_CHARS) return undefined;
  const fast = CANONICAL_V4.exec(addr);
  if (fast) return fast[1];
  const zone = addr.indexOf('%');
  const bare = zone === -1 ? addr : addr.slice(0, zone);
  // Only a text with a colon can be IPv6; asking ipaddr.js's IPv4 check about an IPv6
  // text costs a thrown-and-caught parse (about 9 µs), so the two are told apart first.
  if (bare.indexOf(':') === -1) return ipaddr.IPv4.isValidFourPartDecimal(bare) ? ipaddr.IPv4.parse(bare).toString() : undefined;
  if (!ipaddr.IPv6.isValid(bare)) return undefined;
  const v6 = ipaddr.IPv6.parse(bare);
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  return v6.toRFC5952String();
}

/** The key of a normalised address: IPv4 as is, IPv6 masked to its `/bits` network. */
export function groupAddress(addr: string, bits: number | false): string {
  if (bits === false || addr.indexOf(':') === -1) return addr;
  const parts = ipaddr.IPv6.parse(addr).parts.slice();
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    parts[i] = (parts[i] as number) & (keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff);
  }
  return `${new ipaddr.IPv6(parts).toRFC5952String()}/${bits}`;
}

/** An `ipv6Subnet` option checked: a prefix length from 1 to 128, or false. */
export function checkSubnet(ipv6Subnet: unknown, path: string): number | false {
  if (ipv6Subnet !== false && (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128)) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'a prefix length from 1 to 128, or false',
      received: describe(ipv6Subnet),
      fix: 'Keep the default 56, use 64 for one LAN, or false for whole addresses.',
    });
  }
  return ipv6Subnet;
}
