/**
 * Client identity: the `ip()` key behind trusted proxies, and the other
 * built-in key extractors (`header`, `user`, `tenant`, `constant`).
 *
 * The address comes from the connection's peer, read through the request's
 * {@link RequestReader}: the framework port's (set on the request by the pipeline), or
 * Node's shape (`req.socket.remoteAddress`, `req.headers`) for requests that carry none.
 * `X-Forwarded-For` (or the `for=` nodes of RFC 7239
 * `Forwarded`) is walked only when `trustProxy` says the socket peer is a proxy of
 * ours: right to left, skipping trusted hops, the first untrusted address is the
 * client. A malformed, `unknown` or obfuscated hop ends the walk and the key is the
 * last well-formed address seen, so a client can never choose a key that is not an
 * address it could have connected from. Work per request is bounded: at most
 * `maxHops` entries are ever looked at, each at most a few dozen characters, and the
 * header is scanned from its right end only as far as those entries.
 *
 * Addresses are normalised (IPv4-mapped IPv6 to IPv4, zone ids dropped, RFC 5952
 * text) and IPv6 is grouped by `ipv6Subnet` (default /56: one home or site).
 */
import parseForwarded from 'forwarded-parse';
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';
import { callbackResultError } from './app-errors.js';
import { configError, describe } from './errors.js';
import { unknownOptionFix } from './suggest.js';

/** A Node-shaped request: what key extraction reads when no port reader is set (Node's IncomingMessage fits). */
export interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
  socket?: { remoteAddress?: string | undefined } | null;
}

/**
 * How the key functions read a request: the connection peer's address and the headers. A
 * framework port is one (`HttpPort` extends it); the pipeline sets it on requests that are
 * not Node-shaped (a Hono context), under {@link REQUEST_READER}.
 */
export interface RequestReader<Req = never> {
  /** The address of the connection's peer as the runtime reports it, or undefined when unknown. */
  peerAddress(req: Req): string | undefined;
  /** A request header by lower-case name (repeated fields joined with `, `), or undefined. */
  header(req: Req, name: string): string | undefined;
  /** An object living as long as the request's connection, for work done once per connection. */
  connection?(req: Req): object | undefined;
}

/** Where a request carries its reader (shared by every copy of core). */
export const REQUEST_READER: unique symbol = Symbol.for('tollgate.requestReader') as never;

/** The reader of Node-shaped requests: Node's, Express' and Fastify's (`socket`, `headers`). */
export const nodeReader: RequestReader<RequestLike> = {
  peerAddress: (req) => req.socket?.remoteAddress,
  header: headerValue,
  connection: (req) => req.socket ?? undefined,
};

/** The request's reader: the one its port set on it, else Node's shape. */
export function readerOf(req: object): RequestReader<object> {
  return ((req as { [REQUEST_READER]?: RequestReader<object> })[REQUEST_READER] ?? nodeReader) as RequestReader<object>;
}

/**
 * Which hops are proxies of ours.
 * - `false` (default): none; the socket address is the client.
 * - a number `n`: the `n` hops nearest to this server (the socket peer first).
 * - addresses, CIDRs and the presets `loopback`, `linklocal`, `uniquelocal`, as an array
 *   or a comma-separated string (`'loopback, 10.0.0.0/8'`).
 * - a function `(addr, hop) => boolean`; `hop` 0 is the socket peer.
 * - `true`: every hop (accepted with a warning: any client can then pick its key).
 */
export type TrustProxy = boolean | number | string | readonly string[] | ((addr: string, hop: number) => boolean);

/** A compiled trust decision: is `addr`, `hop` steps away from this server, one of our proxies? */
export type TrustFn = (addr: string, hop: number) => boolean;

export interface IpOptions {
  /**
   * Which hops are trusted proxies (see {@link TrustProxy}).
   * @default false
   * @example ip({ trustProxy: 'loopback, 10.0.0.0/8' })
   */
  trustProxy?: TrustProxy;
  /**
   * Where the forwarded address is read when the socket peer is trusted:
   * `'x-forwarded-for'` (walked), `'forwarded'` (RFC 7239, walked), or a single-value
   * header such as `'x-real-ip'` or `'cf-connecting-ip'`.
   * @default 'x-forwarded-for'
   * @example ip({ trustProxy: 'loopback', header: 'cf-connecting-ip' })
   */
  header?: string;
  /**
   * Prefix length IPv6 clients are grouped by; `false` keys on whole addresses.
   * @default 56
   */
  ipv6Subnet?: number | false;
  /**
   * The most forwarded entries ever looked at per request (walks stop there).
   * @default 32
   */
  maxHops?: number;
}

/** The warning code emitted (once per process) when `trustProxy: true` is used. */
export const TRUST_PROXY_WARNING = 'TOLLGATE_TRUST_PROXY_TRUE';

const DEFAULT_SUBNET = 56;
const DEFAULT_MAX_HOPS = 32;
/** Longer than any address with brackets, zone id and port a proxy would write. */
const MAX_NODE_CHARS = 100;
const MAX_FORWARDED_ELEMENT_CHARS = 512;
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]{1,64}$/;
const CANONICAL_V4 = /^(?:::ffff:)?((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})$/i;

let warnedTrustAll = false;

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
function groupAddress(addr: string, bits: number | false): string {
  if (bits === false || addr.indexOf(':') === -1) return addr;
  const parts = ipaddr.IPv6.parse(addr).parts.slice();
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    parts[i] = (parts[i] as number) & (keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff);
  }
  return `${new ipaddr.IPv6(parts).toRFC5952String()}/${bits}`;
}

function checkSubnet(ipv6Subnet: unknown, path: string): number | false {
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

/**
 * The key `ip()` gives a client at `address`: the address normalised (IPv4-mapped IPv6 as
 * IPv4, RFC 5952 text, zone id dropped) and IPv6 grouped by `ipv6Subnet` exactly as the
 * rule groups it, for operations by key (`limiter.block('ip', ipKey(addr), '1h')`). Pass
 * the `ipv6Subnet` the rule's `ip()` uses. Throws `TG_INVALID_OPTION` for text that is not
 * an IP address.
 * @example ipKey('2001:db8:1:2::7') // '2001:db8:1::/56', the key of every address of that /56
 * @example ipKey('::ffff:203.0.113.7') // '203.0.113.7'
 */
export function ipKey(address: string, options: Pick<IpOptions, 'ipv6Subnet'> = {}): string {
  if (typeof options !== 'object' || options === null) {
    throw configError('TG_INVALID_OPTION', {
      path: 'ipKey',
      expected: 'an options object { ipv6Subnet? }',
      received: describe(options),
      fix: "Call ipKey('203.0.113.7') or ipKey(address, { ipv6Subnet: 64 }).",
    });
  }
  const { ipv6Subnet = DEFAULT_SUBNET, ...rest } = options;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw configError('TG_UNKNOWN_OPTION', {
      path: `ipKey.${unknown}`,
      expected: 'ipv6Subnet',
      received: JSON.stringify(unknown),
      fix: unknownOptionFix(unknown, ['ipv6Subnet']),
    });
  }
  const bits = checkSubnet(ipv6Subnet, 'ipKey.ipv6Subnet');
  const addr = typeof address === 'string' ? normalizeAddress(address.trim()) : undefined;
  if (addr === undefined) {
    throw configError('TG_INVALID_OPTION', {
      path: 'ipKey.address',
      expected: 'an IPv4 or IPv6 address',
      received: describe(address),
      fix: "Pass the client's address, e.g. '203.0.113.7' or '2001:db8::1'.",
    });
  }
  return groupAddress(addr, bits);
}

/**
 * Compiles a `trustProxy` setting once. Throws `TG_INVALID_TRUST_PROXY` for
 * anything it cannot understand.
 */
export function compileTrust(value: TrustProxy | undefined, path = 'trustProxy'): TrustFn | undefined {
  if (value === undefined || value === false || value === 0) return undefined;
  if (value === true) {
    if (!warnedTrustAll) {
      warnedTrustAll = true;
      process.emitWarning(
        'trustProxy: true trusts every X-Forwarded-For / Forwarded hop, so any client can choose its own rate-limit key. ' +
          'Name your proxies instead (a hop count, their addresses or CIDRs); see docs/keys-and-proxies.md.',
        { type: 'TollgateWarning', code: TRUST_PROXY_WARNING },
      );
    }
    return () => true;
  }
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw configError('TG_INVALID_TRUST_PROXY', {
        path,
        expected: 'a hop count as a whole number of 0 or more',
        received: describe(value),
        fix: 'Use the number of proxies in front of the app, e.g. 1 for one load balancer.',
      });
    }
    const n = value;
    return (_addr, hop) => hop < n;
  }
  if (typeof value === 'function') {
    const fn = value;
    return (addr, hop) => {
      const v: unknown = fn(addr, hop);
      if (v === true) return true;
      if (typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function') {
        // Keys are found at once: a promise is never awaited, and its rejection is caught here.
        Promise.resolve(v).catch(() => {});
        throw callbackResultError(path, 'true or false (not a promise)', v, 'Decide from the address itself, e.g. a list of your proxies.');
      }
      return false;
    };
  }
  const list = typeof value === 'string' ? value.split(',') : Array.isArray(value) ? value : undefined;
  if (list === undefined) {
    throw configError('TG_INVALID_TRUST_PROXY', {
      path,
      expected: 'false, a hop count, addresses/CIDRs/presets (array or comma-separated string), a function, or true',
      received: describe(value),
      fix: "For one proxy on this machine use 'loopback'; see docs/keys-and-proxies.md.",
    });
  }
  const entries = list.map((s) => (typeof s === 'string' ? s.trim() : s));
  for (const [i, entry] of entries.entries()) {
    if (typeof entry !== 'string' || entry === '') {
      throw configError('TG_INVALID_TRUST_PROXY', {
        path: `${path}[${i}]`,
        expected: "an address, a CIDR, or one of 'loopback', 'linklocal', 'uniquelocal'",
        received: describe(entry),
        fix: "Write e.g. '10.0.0.0/8' or 'loopback'.",
      });
    }
  }
  try {
    return proxyaddr.compile(entries as string[]);
  } catch (err) {
    throw configError('TG_INVALID_TRUST_PROXY', {
      path,
      expected: "addresses, CIDRs, or the presets 'loopback', 'linklocal', 'uniquelocal'",
      received: `${describe(typeof value === 'string' ? value : entries.join(', '))} (${(err as Error).message})`,
      fix: "Check each entry, e.g. '10.0.0.0/8, fd00::/8' or ['loopback', '203.0.113.7'].",
    });
  }
}

function headerValue(req: RequestLike, name: string): string | undefined {
  // A request of another shape given to a core limiter directly has no `headers`.
  const v = req.headers?.[name];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.join(', ');
}

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
 * The client address key.
 * @example
 * rules: [{ name: 'ip', rate: '100/min', key: ip({ trustProxy: 'loopback' }) }]
 * @example
 * ip({ trustProxy: 1, header: 'forwarded', ipv6Subnet: 64 })
 */
export function ip(options: IpOptions = {}): (req: object) => string {
  if (typeof options !== 'object' || options === null) {
    throw configError('TG_INVALID_OPTION', {
      path: 'ip',
      expected: 'an options object { trustProxy?, header?, ipv6Subnet?, maxHops? }',
      received: describe(options),
      fix: 'Call ip() or ip({ trustProxy: "loopback" }).',
    });
  }
  const { trustProxy, header: headerName = 'x-forwarded-for', ipv6Subnet = DEFAULT_SUBNET, maxHops = DEFAULT_MAX_HOPS, ...rest } = options;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw configError('TG_UNKNOWN_OPTION', {
      path: `ip.${unknown}`,
      expected: 'trustProxy, header, ipv6Subnet or maxHops',
      received: JSON.stringify(unknown),
      fix: unknownOptionFix(unknown, ['trustProxy', 'header', 'ipv6Subnet', 'maxHops']),
    });
  }
  checkSubnet(ipv6Subnet, 'ip.ipv6Subnet');
  if (typeof headerName !== 'string' || !TOKEN.test(headerName.toLowerCase())) {
    throw configError('TG_INVALID_OPTION', {
      path: 'ip.header',
      expected: "a header name such as 'x-forwarded-for', 'forwarded' or 'x-real-ip'",
      received: describe(headerName),
      fix: 'Name the header your proxy writes.',
    });
  }
  if (!Number.isSafeInteger(maxHops) || maxHops < 1 || maxHops > 1000) {
    throw configError('TG_INVALID_OPTION', {
      path: 'ip.maxHops',
      expected: 'a whole number from 1 to 1000',
      received: describe(maxHops),
      fix: 'Keep the default 32; a real proxy chain is a handful of hops.',
    });
  }
  const trust = compileTrust(trustProxy, 'ip.trustProxy');
  const name = headerName.toLowerCase();
  const subnet = ipv6Subnet;

  function socketAddress(reader: RequestReader<object>, req: object): string {
    const raw = reader.peerAddress(req);
    return (raw !== undefined && normalizeAddress(raw)) || 'unknown';
  }

  if (trust === undefined) {
    // Without trusted proxies the key depends on the socket's peer address alone, which a
    // connection keeps for its lifetime: worked out once per socket, not once per request
    // of a keep-alive connection. Weak, so a closed socket takes its entry with it.
    const bySocket = new WeakMap<object, string>();
    return function ipKey(req: object): string {
      const reader = readerOf(req);
      const socket = reader.connection?.(req);
      if (socket) {
        const known = bySocket.get(socket);
        if (known !== undefined) return known;
      }
      const addr = socketAddress(reader, req);
      if (addr === 'unknown') return addr;
      const key = groupAddress(addr, subnet);
      if (socket) bySocket.set(socket, key);
      return key;
    };
  }
  const forwarded = forwardedClient(trust, name, maxHops);
  return function ipKey(req: object): string {
    const reader = readerOf(req);
    const socket = socketAddress(reader, req);
    if (socket === 'unknown') return socket;
    return groupAddress(forwarded(reader, req, socket), subnet);
  };
}

/**
 * The client address behind trusted proxies, given the socket peer's normalised address:
 * the peer itself unless `trust` says it is a proxy of ours, else the forwarding header walked.
 */
function forwardedClient(
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

/**
 * The client's whole address (normalised, never grouped by subnet) as the default `ip()`
 * key finds it with the same `trustProxy`: what allow and deny lists match. `undefined`
 * when the socket has no address. The forwarding header is read only from a trusted peer.
 * @example clientAddress({ trustProxy: 'loopback' })(req) // '198.51.100.7'
 */
export function clientAddress(options: { trustProxy?: TrustProxy | undefined } = {}): (req: object) => string | undefined {
  const trust = compileTrust(options.trustProxy);
  const forwarded = trust === undefined ? undefined : forwardedClient(trust, 'x-forwarded-for', DEFAULT_MAX_HOPS);
  return function addressOf(req) {
    const reader = readerOf(req);
    const raw = reader.peerAddress(req);
    const socket = raw === undefined ? undefined : normalizeAddress(raw);
    if (socket === undefined) return undefined;
    return forwarded === undefined ? socket : forwarded(reader, req, socket);
  };
}

/**
 * A key read from a request header (for example an API key). The value is whatever
 * the client sends: use it for values your own layer has authenticated.
 * @example { name: 'api-key', rate: '1000/h', key: header('x-api-key') }
 */
export function header(name: string): (req: object) => string | undefined {
  if (typeof name !== 'string' || !TOKEN.test(name.toLowerCase())) {
    throw configError('TG_INVALID_KEY', {
      path: 'header',
      expected: 'a header name such as "x-api-key"',
      received: describe(name),
      fix: 'Pass the header name as a string.',
    });
  }
  const lower = name.toLowerCase();
  return function headerKey(req: object): string | undefined {
    const v = readerOf(req).header(req, lower);
    return v === undefined || v === '' ? undefined : v;
  };
}

function idExtractor<R>(what: 'user' | 'tenant', fn: (req: R) => unknown): (req: R) => string | undefined {
  if (typeof fn !== 'function') {
    throw configError('TG_INVALID_KEY', {
      path: what,
      expected: `a function (req) => ${what} id | undefined`,
      received: describe(fn),
      fix: `Pass e.g. ${what}((req) => req.${what}?.id).`,
    });
  }
  const asId = (id: unknown): string | undefined => {
    if (typeof id === 'string') return id === '' ? undefined : id;
    if (typeof id === 'number' || typeof id === 'bigint') return String(id);
    // Absent means "no id": the rule does not apply. Anything else is a bug that would
    // switch the rule off unnoticed (the user object instead of its id): a coded error.
    if (id === undefined || id === null) return undefined;
    throw callbackResultError(
      what,
      `a ${what} id (string or number), undefined or null`,
      id,
      `Return the id, e.g. ${what}((req) => req.${what}?.id).`,
    );
  };
  return function idKey(req: R): string | undefined {
    const id = fn(req);
    if (typeof id === 'object' && id !== null && typeof (id as { then?: unknown }).then === 'function') {
      // An async extractor: the limiter awaits the key.
      return Promise.resolve(id).then(asId) as unknown as string | undefined;
    }
    return asId(id);
  };
}

/**
 * A per-user key: the rule applies only to requests with a user id (anonymous requests
 * are left to other rules). Long or non-ASCII ids are hashed by the limiter.
 * @example { name: 'user', rate: '100/min', key: user((req) => req.user?.id) }
 */
export function user<R>(fn: (req: R) => unknown): (req: R) => string | undefined {
  return idExtractor('user', fn);
}

/**
 * A per-tenant key (organisation, account, project).
 * @example { name: 'tenant', rate: '4000/min', key: tenant((req) => req.user?.orgId) }
 */
export function tenant<R>(fn: (req: R) => unknown): (req: R) => string | undefined {
  return idExtractor('tenant', fn);
}

/**
 * A constant key, for limits shared by every request (a global limit).
 * @example { name: 'global', rate: '10000/min', key: constant('all') }
 */
export function constant(name: string): () => string {
  if (typeof name !== 'string' || name === '') {
    throw configError('TG_INVALID_KEY', {
      path: 'constant',
      expected: 'a non-empty string',
      received: describe(name),
      fix: 'Pass a name such as constant("global").',
    });
  }
  return function constantKey(): string {
    return name;
  };
}
