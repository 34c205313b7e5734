/**
 * The refusal response, framework-agnostic: status, `Retry-After`,
 * `Cache-Control: no-store` (RFC 6585 §4: a 429 must not be stored) and an RFC 9457
 * `application/problem+json` body. Adapters only write what this returns.
 *
 * - 429 `#quota-exceeded` when the client is over a limit (with `violated-policies`).
 * - 503 `#temporary-reduced-capacity` when the server is the reason: load shedding, or
 *   a store failure under `onStoreError: 'deny'` (a decision with `degraded: 'deny'`).
 *
 * Problem types are the IANA HTTP Problem Types registry entries.
 */
import type { Decision } from './types.js';

export const PROBLEM_QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
export const PROBLEM_REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** An RFC 9457 problem details object. */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The names of the rules that refused the request (quota-exceeded only). */
  'violated-policies'?: string[];
}

/** What an adapter writes for a refused request. */
export interface Refusal {
  status: number;
  /** Header fields to set (each replaces any earlier value). */
  headers: Array<[name: string, value: string]>;
  body: ProblemBody;
  contentType: string;
  /** Whole seconds of `Retry-After`, or undefined when waiting cannot help. */
  retryAfter: number | undefined;
}

/** `Retry-After` of a 503 whose cause has no figure of its own (a store failure): 1 s. */
export const CAPACITY_RETRY_AFTER_MS = 1000;

/** Content type of a custom `message` that is a string. */
export const MESSAGE_TEXT_TYPE = 'text/plain; charset=utf-8';
/** Content type of a custom `message` that is an object (sent as JSON). */
export const MESSAGE_JSON_TYPE = 'application/json; charset=utf-8';

/** True when the server, not the client, is the reason for the refusal. */
export function isCapacityRefusal(decision: Decision): boolean {
  return decision.degraded === 'deny';
}

/**
 * `Retry-After` in whole seconds: `ceil(retryAfterMs / 1000)`, never 0 on a refusal.
 * `undefined` when a refusing rule can never admit the request's cost (waiting would
 * not help, so no `Retry-After` is sent).
 */
export function retryAfterSeconds(decision: Decision): number | undefined {
  if (decision.allowed) return undefined;
  for (const r of decision.rules) {
    if (!r.allowed && !r.dryRun && r.reason === 'cost_exceeds_limit') return undefined;
  }
  return Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
}

function policyList(names: readonly string[]): string {
  return names.map((n) => `"${n}"`).join(', ');
}

/** The problem body for a client over its limits. */
export function quotaProblem(decision: Decision, status = 429): ProblemBody {
  const retry = retryAfterSeconds(decision);
  const names = decision.rejectedBy;
  const which = names.length === 1 ? `policy ${policyList(names)}` : `policies ${policyList(names)}`;
  const detail =
    retry === undefined
      ? `This request costs more than ${which} can ever admit; retrying will not help.`
      : `Rate limit exceeded for ${which}. Retry in ${retry} second${retry === 1 ? '' : 's'}.`;
  return { type: PROBLEM_QUOTA_EXCEEDED, title: 'Too Many Requests', status, detail, 'violated-policies': [...names] };
}

/** The problem body for a refusal caused by the server (shedding, store failure). */
export function capacityProblem(detail = 'The server is temporarily unable to decide rate limits; try again shortly.'): ProblemBody {
  return { type: PROBLEM_REDUCED_CAPACITY, title: 'Service Unavailable', status: 503, detail };
}

/**
 * Everything an adapter writes for a refused decision.
 * @param options.statusCode status for over-limit refusals @default 429
 * @param options.capacityRetryAfterMs Retry-After for 503 refusals without a figure of their own @default 1000
 * @example
 * const r = refusal(decision);
 * res.statusCode = r.status; for (const [n, v] of r.headers) res.setHeader(n, v);
 * res.end(JSON.stringify(r.body));
 */
export function refusal(decision: Decision, options: { statusCode?: number; capacityRetryAfterMs?: number } = {}): Refusal {
  if (isCapacityRefusal(decision)) {
    return capacityRefusal(decision.retryAfterMs > 0 ? decision.retryAfterMs : (options.capacityRetryAfterMs ?? CAPACITY_RETRY_AFTER_MS));
  }
  const status = options.statusCode ?? 429;
  const retryAfter = retryAfterSeconds(decision);
  const headers: Array<[string, string]> = [['Cache-Control', 'no-store']];
  if (retryAfter !== undefined) headers.push(['Retry-After', String(retryAfter)]);
  return { status, headers, body: quotaProblem(decision, status), contentType: PROBLEM_CONTENT_TYPE, retryAfter };
}

/** A 503 refusal: load shedding, or a store that failed under `onStoreError: 'deny'`. */
export function capacityRefusal(retryAfterMs: number, detail?: string): Refusal {
  const retryAfter = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return {
    status: 503,
    headers: [
      ['Cache-Control', 'no-store'],
      ['Retry-After', String(retryAfter)],
    ],
    body: capacityProblem(detail),
    contentType: PROBLEM_CONTENT_TYPE,
    retryAfter,
  };
}

/** The 503 an adapter sends when the store failed under `onStoreError: 'deny'`. */
export function storeFailureRefusal(): Refusal {
  return capacityRefusal(CAPACITY_RETRY_AFTER_MS);
}

/**
 * How a custom refusal `message` goes on the wire: a string as text, anything else as
 * JSON. Two calls instead of one pair, so the refusal path allocates nothing more.
 * @example send(res, messageContentType(body), messageText(body))
 */
export function messageContentType(body: string | object): string {
  return typeof body === 'string' ? MESSAGE_TEXT_TYPE : MESSAGE_JSON_TYPE;
}

/** The text of a custom refusal `message` (see `messageContentType`). */
export function messageText(body: string | object): string {
  return typeof body === 'string' ? body : JSON.stringify(body);
}
