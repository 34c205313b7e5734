/**
 * Client identity: the `ip()` key behind trusted proxies, and the other built-in key
 * extractors (`header`, `user`, `tenant`, `constant`).
 *
 * `ip()` reads the connection's peer through the request's reader (request-reader.ts),
 * walks the forwarding header only when `trustProxy` says the peer is a proxy of ours
 * (proxy-trust.ts, forwarded.ts), and keys on the address normalised and IPv6 grouped by
 * `ipv6Subnet` (address.ts).
 */

import { checkSubnet, DEFAULT_SUBNET, groupAddress, normalizeAddress } from './address.js';
import { callbackResultError } from './app-errors.js';
import { configError, describe } from './errors.js';
import { forwardedClient } from './forwarded.js';
import { compileTrust, type TrustProxy } from './proxy-trust.js';
import { type RequestReader, readerOf } from './request-reader.js';
import { unknownOptionFix } from './suggest.js';

// The pieces key functions are built from, importable from here as before the split.
export { normalizeAddress } from './address.js';
export { compileTrust, TRUST_PROXY_WARNING, type TrustFn, type TrustProxy } from './proxy-trust.js';
export { nodeReader, REQUEST_READER, type RequestLike, type RequestReader, readerOf } from './request-reader.js';

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

const DEFAULT_MAX_HOPS = 32;
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]{1,64}$/;

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
