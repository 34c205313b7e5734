/**
 * Client identity (SPEC 5). The default key is the client address from the socket.
 * (Trusted proxies, Forwarded and subnet grouping: see the full implementation.)
 */
import ipaddr from 'ipaddr.js';

/** The parts of an HTTP request that key extraction reads (Node's IncomingMessage fits). */
export interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
  socket?: { remoteAddress?: string | undefined } | null;
}

/** Normalises an address: IPv4-mapped IPv6 to IPv4, zone ids dropped, RFC 5952 text. */
export function normalizeAddress(addr: string): string | undefined {
  const zone = addr.indexOf('%');
  const bare = zone === -1 ? addr : addr.slice(0, zone);
  if (!ipaddr.isValid(bare)) return undefined;
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address().toString();
  return parsed.toString();
}

/** The client address key. */
export function ip(): (req: unknown) => string {
  return function ipKey(req: unknown): string {
    const addr = (req as RequestLike).socket?.remoteAddress;
    return (addr && normalizeAddress(addr)) || 'unknown';
  };
}

/** A constant key, for global limits. */
export function constant(name: string): () => string {
  return () => name;
}
