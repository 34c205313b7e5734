/**
 * Which hops in front of this server are proxies of ours (`trustProxy`), compiled once
 * into a function of (address, hop); hop 0 is the socket peer.
 */
import proxyaddr from 'proxy-addr';
import { callbackResultError } from './app-errors.js';
import { configError, describe } from './errors.js';

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

/** The warning code emitted (once per process) when `trustProxy: true` is used. */
export const TRUST_PROXY_WARNING = 'TOLLGATE_TRUST_PROXY_TRUE';

let warnedTrustAll = false;

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
