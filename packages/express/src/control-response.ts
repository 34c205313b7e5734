/**
 * Writing what the core controls decide (SPEC 7, 8) onto an Express response: header
 * fields (draft-10 items appended to what earlier limiters wrote) and refusals.
 */
import { applyHeaders, type HeaderField, ip, type KeyFn, type Refusal, type TrustProxy } from '@tollgate/core';
import type { Request, Response } from 'express';

/** Options every control's middleware shares for finding the client address. */
export interface ClientAddressOptions {
  /**
   * Which proxies in front of the app to trust when finding the client address (the
   * default `ip()` key). See docs/keys-and-proxies.md.
   * @default false
   */
  trustProxy?: TrustProxy;
  /**
   * IPv6 prefix length the default `ip()` key groups clients by; `false` for whole addresses.
   * @default 56
   */
  ipv6Subnet?: number | false;
}

/** The default key of a control: the client address, trusted-proxy aware. */
export function defaultKeyOf(o: ClientAddressOptions): KeyFn<Request> {
  return ip({
    ...(o.trustProxy !== undefined ? { trustProxy: o.trustProxy } : {}),
    ...(o.ipv6Subnet !== undefined ? { ipv6Subnet: o.ipv6Subnet } : {}),
  }) as KeyFn<Request>;
}

/** Splits the Express-only options from the ones the core control takes. */
export function splitAddressOptions<T extends ClientAddressOptions>(o: T): [Omit<T, 'trustProxy' | 'ipv6Subnet'>, KeyFn<Request>] {
  const { trustProxy, ipv6Subnet, ...rest } = o;
  return [rest, defaultKeyOf({ ...(trustProxy !== undefined ? { trustProxy } : {}), ...(ipv6Subnet !== undefined ? { ipv6Subnet } : {}) })];
}

export function writeFields(res: Response, fields: readonly HeaderField[]): void {
  applyHeaders(
    fields,
    (name) => res.getHeader(name),
    (name, value) => res.setHeader(name, value),
  );
}

/** Sends a refusal built by core (status, Retry-After, no-store, problem body). */
export function sendRefusal(res: Response, r: Refusal): void {
  const body = JSON.stringify(r.body);
  res.statusCode = r.status;
  for (const [name, value] of r.headers) res.setHeader(name, value);
  res.setHeader('Content-Type', r.contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

export type { Request, Response };
