/**
 * Reading a server's rate-limit headers (docs/headers.md lists the forms tollgate
 * itself writes). Four generations are understood:
 *
 * - draft-ietf-httpapi-ratelimit-headers-08 to -10: `RateLimit: "user";r=42;t=18, ...`
 *   and `RateLimit-Policy: "user";q=100;w=60, ...` (Structured Field Lists).
 * - draft-7: `RateLimit: limit=100, remaining=42, reset=18` (a Dictionary) and
 *   `RateLimit-Policy: 100;w=60`.
 * - draft-6 and earlier: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`
 *   (reset in delta seconds).
 * - `X-RateLimit-Limit` / `-Remaining` / `-Reset`, where Reset is read as a Unix epoch
 *   only when it is plainly one (see `readXReset`), else as delta seconds.
 *
 * Every form a response carries is read and combined. A malformed field is ignored,
 * never thrown: a server's bad header must not fail the caller's request.
 */
import { parseHttpDate } from './http-date.js';
import { type BareItem, type Item, type Member, parseDictionary, parseItem, parseList } from './structured-fields.js';

/** One limit a response reports. */
export interface RateLimitReport {
  /** Which header form it came from. */
  source: 'draft-10' | 'draft-7' | 'draft-6' | 'x-ratelimit';
  /** The policy name (draft-10 items), when given. */
  policy?: string;
  /** Units left. */
  remaining: number;
  /** ms until the quota resets (or, when `remaining` is 0, until the next unit), when given. */
  resetMs?: number;
  /** The quota, when the response says (RateLimit-Policy `q`, draft-7 `limit`, `*-Limit`). */
  limit?: number;
  /** The policy window in ms, when the response says (`w`). */
  windowMs?: number;
}

/** Anything with a `get(name)` like the fetch `Headers` class. */
export interface HeaderReader {
  get(name: string): string | null;
}

/** Epoch seconds from 2001-09-09 up to (not including) year 5138; epoch ms from 2001-09-09. */
const EPOCH_S_MIN = 1e9;
const EPOCH_S_MAX = 1e11;
const EPOCH_MS_MIN = 1e12;
const EPOCH_MS_MAX = 1e14;

function wholeNonNegative(v: BareItem | undefined): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

function isItem(m: Member): m is Item {
  return !Array.isArray(m.value);
}

function nameOf(v: BareItem): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && v !== null && 'token' in v) return v.token;
  return undefined;
}

/** draft-08..10 `RateLimit` list, joined with `RateLimit-Policy` by policy name. */
function readDraft10(h: HeaderReader): RateLimitReport[] {
  const list = parseList(h.get('ratelimit'));
  if (!list) return [];
  const policies = new Map<string, { limit?: number; windowMs?: number }>();
  for (const m of parseList(h.get('ratelimit-policy')) ?? []) {
    const name = isItem(m) ? nameOf(m.value) : undefined;
    if (name === undefined) continue;
    const q = wholeNonNegative(m.params.get('q'));
    const w = wholeNonNegative(m.params.get('w'));
    policies.set(name, { ...(q !== undefined && { limit: q }), ...(w !== undefined && w > 0 && { windowMs: w * 1000 }) });
  }
  const out: RateLimitReport[] = [];
  for (const m of list) {
    if (!isItem(m)) continue;
    const policy = nameOf(m.value);
    const r = wholeNonNegative(m.params.get('r'));
    if (policy === undefined || r === undefined) continue;
    const t = wholeNonNegative(m.params.get('t'));
    out.push({ source: 'draft-10', policy, remaining: r, ...(t !== undefined && { resetMs: t * 1000 }), ...policies.get(policy) });
  }
  return out;
}

/** draft-7 `RateLimit: limit=100, remaining=42, reset=18`. */
function readDraft7(h: HeaderReader): RateLimitReport[] {
  const dict = parseDictionary(h.get('ratelimit'));
  const remainingItem = dict?.get('remaining');
  if (!dict || !remainingItem || !isItem(remainingItem)) return [];
  const remaining = wholeNonNegative(remainingItem.value);
  if (remaining === undefined) return [];
  const reset = dict.get('reset');
  const limit = dict.get('limit');
  const resetS = reset && isItem(reset) ? wholeNonNegative(reset.value) : undefined;
  const limitN = limit && isItem(limit) ? wholeNonNegative(limit.value) : undefined;
  return [
    {
      source: 'draft-7',
      remaining,
      ...(resetS !== undefined && { resetMs: resetS * 1000 }),
      ...(limitN !== undefined && { limit: limitN }),
    },
  ];
}

/** A single integer item, or the first member of a list of them (`RateLimit-Limit: 10, 10;w=1`). */
function firstInteger(value: string | null): number | undefined {
  const item = parseItem(value);
  if (item) return wholeNonNegative(item.value);
  const first = parseList(value)?.[0];
  return first && isItem(first) ? wholeNonNegative(first.value) : undefined;
}

/** draft-6 and earlier: `RateLimit-Remaining` / `RateLimit-Reset` (delta seconds). */
function readDraft6(h: HeaderReader): RateLimitReport[] {
  const remaining = firstInteger(h.get('ratelimit-remaining'));
  if (remaining === undefined) return [];
  const reset = firstInteger(h.get('ratelimit-reset'));
  const limit = firstInteger(h.get('ratelimit-limit'));
  return [{ source: 'draft-6', remaining, ...(reset !== undefined && { resetMs: reset * 1000 }), ...(limit !== undefined && { limit }) }];
}

const PLAIN_NUMBER = /^\d{1,16}(?:\.\d{1,6})?$/;

/**
 * `X-RateLimit-Reset` as ms from now. Servers disagree on its meaning: GitHub sends Unix
 * epoch seconds, others delta seconds, a few epoch milliseconds. A value is read as an
 * epoch only when it is plainly one: from 1e9 (September 2001) to 1e11 as epoch seconds,
 * from 1e12 to 1e14 as epoch milliseconds. Below 1e9 it is delta seconds (a delta of 31
 * years is not a rate limit). Between 1e11 and 1e12 it is ambiguous and ignored. Epochs
 * are measured against the response's `Date` header when valid (same clock as the
 * server), else the client's clock; a past epoch means 0.
 */
export function readXReset(value: string | null, nowMs: number, dateHeader: string | null): number | undefined {
  const v = value?.trim();
  if (!v || !PLAIN_NUMBER.test(v)) return undefined;
  const n = Number(v);
  const reference = (dateHeader ? parseHttpDate(dateHeader) : undefined) ?? nowMs;
  if (n < EPOCH_S_MIN) return Math.ceil(n * 1000);
  if (n < EPOCH_S_MAX) return Math.max(0, Math.ceil(n * 1000 - reference));
  if (n >= EPOCH_MS_MIN && n < EPOCH_MS_MAX) return Math.max(0, Math.ceil(n - reference));
  return undefined;
}

function readX(h: HeaderReader, nowMs: number): RateLimitReport[] {
  const rem = h.get('x-ratelimit-remaining')?.trim();
  if (!rem || !/^\d{1,15}$/.test(rem)) return [];
  const resetMs = readXReset(h.get('x-ratelimit-reset'), nowMs, h.get('date'));
  const lim = h.get('x-ratelimit-limit')?.trim();
  const limit = lim && /^\d{1,15}$/.test(lim) ? Number(lim) : undefined;
  return [
    { source: 'x-ratelimit', remaining: Number(rem), ...(resetMs !== undefined && { resetMs }), ...(limit !== undefined && { limit }) },
  ];
}

/**
 * Every limit a response reports, from every header form it carries. Never throws.
 * @example parseRateLimit(res.headers, Date.now())
 * // [{ source: 'draft-10', policy: 'user', remaining: 0, resetMs: 18000, limit: 100, windowMs: 60000 }]
 */
export function parseRateLimit(headers: HeaderReader, nowMs: number): RateLimitReport[] {
  try {
    const d10 = readDraft10(headers);
    return [...d10, ...(d10.length === 0 ? readDraft7(headers) : []), ...readDraft6(headers), ...readX(headers, nowMs)];
  } catch {
    // A Headers implementation that throws on get(): treat as no information.
    return [];
  }
}

/**
 * Whether a response was served from a cache: an `Age` field (RFC 9111 §5.1, whole
 * seconds) above 0. Its rate-limit fields then tell the state at the time it was stored,
 * not now (draft-ietf-httpapi-ratelimit-headers-11). A malformed `Age` is ignored.
 */
export function servedFromCache(headers: HeaderReader): boolean {
  try {
    const age = headers.get('age')?.trim();
    return age !== undefined && /^\d{1,15}$/.test(age) && Number(age) > 0;
  } catch {
    return false;
  }
}

/**
 * How long the next request must wait because a limit is used up: the longest `resetMs`
 * among reports with `remaining` 0. `undefined` when
 * no exhausted report says how long.
 */
export function exhaustedWaitMs(reports: readonly RateLimitReport[]): number | undefined {
  let wait: number | undefined;
  for (const r of reports) {
    if (r.remaining === 0 && r.resetMs !== undefined && r.resetMs > 0 && (wait === undefined || r.resetMs > wait)) wait = r.resetMs;
  }
  return wait;
}
