/**
 * The error catalogue of @tollgate/cli.
 *
 * Problems with a rule itself are reported with core's `TollgateError` and its codes
 * (the simulator compiles rules with the same `compileRules` as production). This
 * catalogue covers what only the command line has: arguments, arrival patterns,
 * trace files and config files. Every code is documented in `docs/cli.md` (a test checks).
 */

const BRAND = Symbol.for('tollgate.cli-error');

/** Codes and their one-line meaning. */
export const CLI_ERROR_CODES = {
  TG_CLI_UNKNOWN_COMMAND: 'The first argument is not a tollgate command.',
  TG_CLI_INVALID_ARGUMENT: 'A command-line flag is unknown, missing its value, or has a value that cannot be used.',
  TG_CLI_INVALID_PATTERN: 'An arrival pattern cannot be understood.',
  TG_CLI_INVALID_TRACE: 'A CSV trace has a malformed line.',
  TG_CLI_INVALID_CONFIG: 'A config file cannot be read or parsed, or has the wrong shape.',
  TG_CLI_REDIS_FAILED: 'tollgate keys or compare --lease could not reach Redis, or Redis failed the operation.',
  TG_CLI_NO_REDIS_CLIENT: 'tollgate keys or compare --lease found no Redis client package (ioredis or redis) installed.',
} as const;

export type CliErrorCode = keyof typeof CLI_ERROR_CODES;

export interface CliErrorDetails {
  /** Where the problem is: a flag, a pattern, `trace.csv:12`, `config.yaml rules[0]`. */
  path?: string;
  expected: string;
  received: string;
  fix: string;
}

export class CliError extends Error {
  readonly code: CliErrorCode;
  readonly path: string | undefined;
  readonly expected: string;
  readonly received: string;
  readonly fix: string;

  constructor(code: CliErrorCode, details: CliErrorDetails, options?: { cause?: unknown }) {
    const where = details.path ? `${details.path}: ` : '';
    super(`${where}expected ${details.expected}, received ${details.received}. ${details.fix}`, options);
    this.name = 'CliError';
    this.code = code;
    this.path = details.path;
    this.expected = details.expected;
    this.received = details.received;
    this.fix = details.fix;
  }

  get [BRAND](): true {
    return true;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/** Shorthand used across the package. */
export function cliError(code: CliErrorCode, details: CliErrorDetails, cause?: unknown): CliError {
  return new CliError(code, details, cause === undefined ? undefined : { cause });
}

/** Renders a value for a message: short, quoted when it is text. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}
