/**
 * The error catalogue of @tollgate/client.
 *
 * Same pattern as the core catalogue: every error has a stable `code`, and a message
 * that says what was expected, what was received and what to do. `instanceof
 * TollgateClientError` holds across duplicate installs (branded with a registry symbol).
 * docs/client.md documents every code; a test checks that they agree.
 */

const BRAND = Symbol.for('tollgate.client.error');

/** Codes and their one-line meaning. */
export const CLIENT_ERROR_CODES = {
  TGC_INVALID_OPTION: 'An option of createFetch has the wrong type or value.',
  TGC_UNKNOWN_OPTION: 'The options of createFetch contain a key the client does not know.',
  TGC_NO_FETCH: 'No fetch function was given and there is no global fetch.',
  TGC_TIMEOUT: 'An attempt did not answer within timeoutMs and could not be retried.',
  TGC_DEADLINE_EXCEEDED: 'The request could not be sent before its deadline (a pacing or RateLimit wait would pass it).',
  TGC_PACE_UNSATISFIABLE: 'The pacing rule can never admit this request (its cost exceeds what the rule admits).',
} as const;

export type ClientErrorCode = keyof typeof CLIENT_ERROR_CODES;

export interface ClientErrorDetails {
  expected: string;
  received: string;
  fix: string;
  /** Where the problem is, e.g. `createFetch.baseMs`. */
  path?: string;
}

export class TollgateClientError extends Error {
  readonly code: ClientErrorCode;
  readonly path: string | undefined;
  readonly expected: string | undefined;
  readonly received: string | undefined;
  readonly fix: string | undefined;

  constructor(code: ClientErrorCode, message: string, details?: ClientErrorDetails, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TollgateClientError';
    this.code = code;
    this.path = details?.path;
    this.expected = details?.expected;
    this.received = details?.received;
    this.fix = details?.fix;
  }

  get [BRAND](): true {
    return true;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/** Builds the error for a bad option: "<path>: expected X, received Y. Fix." */
export function clientConfigError(code: ClientErrorCode, details: ClientErrorDetails): TollgateClientError {
  const where = details.path ? `${details.path}: ` : '';
  return new TollgateClientError(code, `${where}expected ${details.expected}, received ${details.received}. ${details.fix}`, details);
}
