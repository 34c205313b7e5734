/**
 * The client behind trusted proxies: `X-Forwarded-For` (or the `for=` nodes of RFC 7239
 * `Forwarded`) walked right to left, skipping trusted hops; the first untrusted address
 * is the client. A malformed, `unknown` or obfuscated hop ends the walk and the key is the
 * last well-formed address seen, so a client can never choose a key that is not an
 * address it could have connected from. Work per request is bounded: at most `maxHops`
 * entries are ever looked at, each at most a few dozen characters, and the header is
 * scanned from its right end only as far as those entries.
 */
import parseForwarded from 'forwarded-parse';
import ipaddr from 'ipaddr.js';
import { MAX_NODE_CHARS, normalizeAddress } from './address.js';
import type { TrustFn } from './proxy-trust.js';
import type { RequestReader } from './request-reader.js';

const MAX_FORWARDED_ELEMENT_CHARS = 512;

/** One `X-Forwarded-For` entry: an address, tolerating `[v6]:port` and `v4:port`. */
function parseXffNode(raw: string): string | undefined {
  const s = raw.trim();
  if (s.length === 0 || s.length > MAX_NODE_CHARS) return undefined;
  return parseNode(s);
}

/** A node as proxies write it: bare address, `[v6]`, `[v6]:port` or `v4:port`. */
function parseNode(s: string): string | undefined {
  if (s.charCodeAt(0) === 91 /* [ */) {
    const close = s.indexOf(']');
    if (close === -1) return undefined;
    const rest = s.slice(close + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return undefined;
    const inner = s.slice(1, close);
    return inner.indexOf(':') === -1 ? undefined : normalizeAddress(inner);
  }
  const colon = s.indexOf(':');
  if (colon !== -1 && colon === s.lastIndexOf(':')) {
    // IPv4 with a port: one colon only (IPv6 has at least two).
    if (!/^\d{1,5}$/.test(s.slice(colon + 1))) return undefined;
    const v4 = s.slice(0, colon);
    return ipaddr.IPv4.isValidFourPartDecimal(v4) ? normalizeAddress(v4) : undefined;
  }
  return normalizeAddress(s);
}

/** One `Forwarded` element: its `for=` node, parsed by forwarded-parse; undefined ends the walk. */
function parseForwardedElement(element: string): string | undefined {
  const s = element.trim();
  if (s.length === 0 || s.length > MAX_FORWARDED_ELEMENT_CHARS) return undefined;
  let parsed: Array<Record<string, string | undefined>>;
  try {
    parsed = parseForwarded(s) as Array<Record<string, string | undefined>>;
  } catch {
    return undefined;
  }
  if (parsed.length !== 1) return undefined;
  const params = parsed[0] as Record<string, string | undefined>;
  // RFC 7239 section 4: a parameter must not occur twice in one element. The parser keeps
  // the last value of a repeated one, so an element is malformed when it names fewer
  // parameters than it has pairs (`for=6.6.6.6;for=198.51.100.7`).
  if (Object.keys(params).length !== pairCount(s)) return undefined;
  const node = params.for;
  // `unknown` and obfuscated identifiers (`_hidden`) name no address: the walk ends.
  if (node === undefined || node.length === 0 || node.length > MAX_NODE_CHARS) return undefined;
  return parseNode(node);
}

/** The `name=value` pairs of a well-formed element: its `;` outside quoted strings, plus one. */
function pairCount(element: string): number {
  let pairs = 1;
  let quoted = false;
  for (let i = 0; i < element.length; i++) {
    const c = element.charCodeAt(i);
    if (quoted) {
      // A quoted-pair: the next character is literal.
      if (c === 0x5c) i++;
      else if (c === 0x22) quoted = false;
    } else if (c === 0x22) quoted = true;
    else if (c === 0x3b) pairs++;
  }
  return pairs;
}

/**
 * Walks a comma-separated list from its right end. `parse` turns an entry into a
 * normalised address or `undefined` (malformed). Returns the client address.
 */
function walk(list: string, socket: string, trust: TrustFn, maxHops: number, parse: (entry: string) => string | undefined): string {
  let client = socket;
  let end = list.length;
  for (let hop = 1; hop <= maxHops && end >= 0; hop++) {
    const comma = list.lastIndexOf(',', end - 1);
    // An entry longer than any address is malformed: slice at most a bounded piece.
    const start = comma + 1;
    const entry = end - start > MAX_FORWARDED_ELEMENT_CHARS ? '' : list.slice(start, end);
    const addr = parse(entry);
    if (addr === undefined) return client;
    client = addr;
    if (!trust(addr, hop)) return addr;
    if (comma === -1) return addr;
    end = comma;
  }
  return client;
}

/**
 * The client address behind trusted proxies, given the socket peer's normalised address:
 * the peer itself unless `trust` says it is a proxy of ours, else the forwarding header walked.
 */
export function forwardedClient(
  trust: TrustFn,
  name: string,
  maxHops: number,
): (reader: RequestReader<object>, req: object, socket: string) => string {
  const parse = name === 'forwarded' ? parseForwardedElement : parseXffNode;
  const walked = name === 'forwarded' || name === 'x-forwarded-for';
  return function clientOf(reader, req, socket) {
    if (!trust(socket, 0)) return socket;
    const value = reader.header(req, name);
    if (value === undefined) return socket;
    if (walked) return walk(value, socket, trust, maxHops, parse);
    return (value.length <= MAX_NODE_CHARS && parseXffNode(value)) || socket;
  };
}
