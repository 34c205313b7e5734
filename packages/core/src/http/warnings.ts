/**
 * Misconfigurations users make every day, reported once per process (docs/errors.md,
 * "Process warnings"): as a process warning (`process.emitWarning`, type
 * `TollgateWarning`) and on the `tollgate:warning` diagnostics channel.
 *
 * - `TOLLGATE_TRUST_PROXY_UNSET`: the framework trusts a proxy (Express' `trust proxy`, Koa's `app.proxy`)
 *   while tollgate's `trustProxy` is not set, so `req.ip` and tollgate's key differ.
 * - `TOLLGATE_FORWARDED_UNTRUSTED`: a request from a loopback or private peer carries
 *   `X-Forwarded-For` or `Forwarded` while no proxy is trusted: the app is most likely
 *   behind a proxy and every client shares the proxy's address as its key.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import ipaddr from 'ipaddr.js';
import type { RequestReader } from '../keys.js';

export const TRUST_PROXY_UNSET_WARNING = 'TOLLGATE_TRUST_PROXY_UNSET';
export const FORWARDED_UNTRUSTED_WARNING = 'TOLLGATE_FORWARDED_UNTRUSTED';
/** Where the warnings are published: `{ code, message, adapter }`. */
export const PROXY_WARNING_CHANNEL = 'tollgate:warning';

const channel = diagnosticsChannel.channel(PROXY_WARNING_CHANNEL);
const warned = new Set<string>();
/** `warned.has(FORWARDED_UNTRUSTED_WARNING)`, read on every request until it is given. */
let forwardedWarned = false;

function warn(code: string, message: string, adapter: string): void {
  if (warned.has(code)) return;
  warned.add(code);
  if (code === FORWARDED_UNTRUSTED_WARNING) forwardedWarned = true;
  process.emitWarning(message, { type: 'TollgateWarning', code });
  if (channel.hasSubscribers) channel.publish({ code, message, adapter });
}

function isInternal(address: string | undefined): boolean {
  if (address === undefined || !ipaddr.isValid(address)) return false;
  let a = ipaddr.parse(address);
  if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
  const range = a.range();
  return range === 'loopback' || range === 'private' || range === 'uniqueLocal' || range === 'linkLocal';
}

/** Forgets which warnings were given (tests that check each adapter in one process). */
export function resetProxyWarnings(): void {
  warned.clear();
  forwardedWarned = false;
}

export interface ProxyWarningOptions {
  /** The adapter's name in the message (`express`, `fastify`, `node`). */
  adapter: string;
  /** Whether tollgate's `trustProxy` names a proxy. */
  trusted: boolean;
}

/** What the check reads of a request: the port's reader and its framework's own proxy trust. */
export interface WarningSource<R> extends RequestReader<R> {
  frameworkTrust?(req: R): unknown;
}

/**
 * The per-request check of one limiter or control: a no-op once both warnings were
 * given, or when a proxy is trusted.
 * @example const check = proxyWarnings({ adapter: 'express', trusted: false }); check(expressPort, req)
 */
export function proxyWarnings(o: ProxyWarningOptions): <R>(port: WarningSource<R>, req: R) => void {
  let frameworkChecked = false;
  return function check(port, req) {
    if (o.trusted) return;
    if (!frameworkChecked && port.frameworkTrust !== undefined) {
      frameworkChecked = true;
      const frameworkTrusts = port.frameworkTrust(req);
      if (frameworkTrusts !== undefined && frameworkTrusts !== false && frameworkTrusts !== 0) {
        warn(
          TRUST_PROXY_UNSET_WARNING,
          `The ${o.adapter} app trusts a proxy (its own setting is on: Express' 'trust proxy', Koa's app.proxy) but tollgate's trustProxy is not: ` +
            'tollgate keys on the socket address, so every client behind the proxy shares one budget. ' +
            "Set trustProxy to the same proxies (e.g. trustProxy: 'loopback'); see docs/keys-and-proxies.md.",
          o.adapter,
        );
      }
    }
    if (forwardedWarned) return;
    if (port.header(req, 'x-forwarded-for') === undefined && port.header(req, 'forwarded') === undefined) return;
    const peer = port.peerAddress(req);
    if (!isInternal(peer)) return;
    warn(
      FORWARDED_UNTRUSTED_WARNING,
      `A request from ${peer} (a loopback or private address) carries X-Forwarded-For or Forwarded, ` +
        "but tollgate trusts no proxy: if the app runs behind one, every client shares the proxy's key. " +
        "Set trustProxy (e.g. trustProxy: 'loopback' for nginx on the same machine); see docs/keys-and-proxies.md.",
      o.adapter,
    );
  };
}
