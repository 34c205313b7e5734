/**
 * `Retry-After` (RFC 9110 section 10.2.3): delay-seconds or an HTTP-date.
 *
 * How odd values are read (documented in docs/client.md):
 * - `delay-seconds` is whole seconds; a decimal such as `1.5` is accepted leniently and
 *   rounded up to the millisecond.
 * - An HTTP-date is measured against the response's own `Date` header when it has a valid
 *   one (both come from the server's clock, so clock skew between client and server
 *   cancels out), else against the client's clock.
 * - `0`, a date in the past, and anything malformed (negative numbers, junk, several
 *   conflicting values) give `undefined`: the server asked for no usable wait, and the
 *   client falls back to its own full-jitter backoff rather than retrying at once.
 */
import { parseHttpDate } from './http-date.js';

const SECONDS = /^\d{1,12}(?:\.\d{1,6})?$/;

/**
 * The wait in milliseconds a `Retry-After` value asks for, or `undefined` (see above).
 * @param value the header value (`null` when absent)
 * @param nowMs the client's clock
 * @param dateHeader the response's `Date` header, used as the reference for HTTP-dates
 * @example parseRetryAfter('3', Date.now()) // 3000
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number, dateHeader?: string | null): number | undefined {
  if (typeof value !== 'string') return undefined;
  const v = value.trim();
  if (SECONDS.test(v)) {
    const ms = Math.ceil(Number(v) * 1000);
    return ms > 0 && Number.isFinite(ms) ? ms : undefined;
  }
  const at = parseHttpDate(v);
  if (at === undefined) return undefined;
  const serverNow = typeof dateHeader === 'string' ? parseHttpDate(dateHeader) : undefined;
  const ms = at - (serverNow ?? nowMs);
  return ms > 0 ? ms : undefined;
}
