/**
 * The error catalogue of @tollgate/core.
 *
 * Every error carries a stable `code`. Messages say what was expected, what was
 * received and how to fix it. `instanceof TollgateError` holds across duplicate
 * installs of the package because the class is branded with a registry symbol.
 */

const BRAND = Symbol.for('tollgate.error');

/** Codes and their one-line meaning. `docs/errors.md` documents every one (a test checks). */
export const ERROR_CODES = {
  TG_INVALID_OPTION: 'An option has the wrong type or value.',
  TG_UNKNOWN_OPTION: 'An options object contains a key tollgate does not know.',
  TG_INVALID_DURATION: 'A duration is not a positive number of milliseconds or a string like "15m".',
  TG_INVALID_RATE: 'A rate shorthand is not of the form "<count>/<period>" or "<count> per <period>".',
  TG_INVALID_SIZE: 'A size or byte rate is not a positive number of bytes (at most 1 TiB) or a string like "16MB" or "2MB/s".',
  TG_INVALID_LIMIT: 'A limit, burst, queue or quota is not a positive integer.',
  TG_INVALID_COST: 'A cost is not a positive integer, or can never be admitted by the rule.',
  TG_UNKNOWN_ALGORITHM: 'The algorithm name is not one of the five tollgate provides.',
  TG_DUPLICATE_RULE: 'Two rules of one stack have the same name.',
  TG_NO_RULES: 'A limiter was created without rules.',
  TG_INVALID_KEY: 'A rule key is not a function, or a key given to an operation by key is not a string or number.',
  TG_INVALID_TRUST_PROXY: 'A trustProxy setting cannot be understood.',
  TG_INVALID_HEADERS: 'A headers mode is not one of draft-10, draft-7, draft-6, legacy or false.',
  TG_STORE_CLOSED: 'A store was used after close().',
  TG_STORE_ERROR: 'A store failed to decide (wraps the cause).',
  TG_STORE_TIMEOUT: 'A store call did not answer within its deadline.',
  TG_STORE_UNCONFIRMED: 'An operation by key was sent but not answered within its deadline: it may have been applied.',
  TG_INVALID_TIME: 'A clock gave a time that is not a finite number of milliseconds.',
  TG_INVALID_CALLBACK_RESULT: 'A callback (key, cost, skip, message, handler, delay) returned a value of the wrong type at request time.',
  TG_UNKNOWN_RULE: 'An operation by key or limiter.update names a rule the limiter does not have.',
  TG_INVALID_UNITS: 'The units of penalize or reward are not a positive whole number.',
  TG_STORE_UNSUPPORTED: 'The store cannot run an operation by key (it has no keyOp), or cannot settle a reservation (no settle).',
  TG_INVALID_ACTUAL_COST: 'A reservation was settled with an actual cost that is not a non-negative number within bounds.',
  TG_ALREADY_SETTLED: 'A reservation was settled (or cancelled) a second time.',
  TG_RESERVATION_REFUSED: 'A refused reservation was settled or cancelled: it reserved nothing.',
  TG_UNSUPPORTED_CONTEXT: 'A rate-limit guard met a request that is not HTTP (a GraphQL resolver, a WebSocket gateway, a microservice).',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorDetails {
  /** What tollgate expected. */
  expected: string;
  /** What it received (already rendered for humans). */
  received: string;
  /** What to do about it. */
  fix: string;
  /** Where the problem is, e.g. `rules[2].window`. */
  path?: string;
}

/**
 * Every error tollgate throws. Match on `code` (stable, listed in docs/errors.md), never on
 * the message. Configuration errors also say where (`path`), what was `expected`, what was
 * `received` and the `fix`. `instanceof` holds across duplicate installs of the package.
 * @example
 * try {
 *   createLimiter({ rules: [{ name: 'ip', limit: 0, window: '1m' }] });
 * } catch (err) {
 *   if (err instanceof TollgateError && err.code === 'TG_INVALID_LIMIT') console.error(err.path, err.fix);
 * }
 */
export class TollgateError extends Error {
  /** The stable code, e.g. `'TG_INVALID_DURATION'`. */
  readonly code: ErrorCode;
  /** Where the problem is, e.g. `rules[2].window`; `undefined` for runtime errors. */
  readonly path: string | undefined;
  /** What tollgate expected there. */
  readonly expected: string | undefined;
  /** What it received, rendered for humans. */
  readonly received: string | undefined;
  /** What to do about it. */
  readonly fix: string | undefined;

  constructor(code: ErrorCode, message: string, details?: ErrorDetails, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TollgateError';
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

/** Renders any value for an error message: short, never the whole of a huge string. */
export function describe(value: unknown): string {
  if (typeof value === 'string') {
    const s = value.length > 60 ? `${value.slice(0, 57)}...` : value;
    return JSON.stringify(s);
  }
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : String(value);
  if (typeof value === 'function') return 'a function';
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}

/** Builds the error users see for a bad option: "<path>: expected X, received Y. Fix." */
export function configError(code: ErrorCode, details: ErrorDetails): TollgateError {
  const where = details.path ? `${details.path}: ` : '';
  return new TollgateError(code, `${where}expected ${details.expected}, received ${details.received}. ${details.fix}`, details);
}
