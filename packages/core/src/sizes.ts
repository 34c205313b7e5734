/**
 * Byte sizes and byte rates as people write them (docs/limit-rate.md, "Sizes").
 *
 * A size is a whole number of bytes or a string `<number><unit>`: decimal units `B`,
 * `KB` (1000), `MB`, `GB`, `TB` and binary units `KiB` (1024), `MiB`, `GiB`, `TiB`, case
 * insensitive except that a lower-case `b` (`'2Mb'`, `'512kb'`, `'10b'`) reads as bits to
 * many people and is refused. A byte rate is a size per second: `'2MB/s'`,
 * `'512KiB/s'`, `'1 MB/sec'`, or a number of bytes per second. Fractions are allowed
 * before a unit (`'1.5MB'`) and rounded to whole bytes.
 */
import { configError, describe } from './errors.js';

/** A size written with a unit, with or without a space: `'512KB'`, `'16MB'`, `'2 MiB'`. */
export type SizeString = `${number}${string}`;

/** A size in bytes: a whole number, or a string like `'512KB'`, `'16MB'`, `'2MiB'`. */
export type Size = number | SizeString;

/** A byte rate: bytes per second as a number, or `'2MB/s'`, `'512KiB/s'`. */
export type ByteRate = number | `${number}${string}/s` | `${number}${string}/sec`;

/** The largest size or rate accepted (1 TiB, or 1 TiB per second): far past any link. */
export const MAX_BYTES = 2 ** 40;

const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

const SIZE_FORMS =
  "a whole number of bytes, or a string such as '512KB', '16MB', '2MiB' (B, KB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024)";
const SIZE = /^(\d+(?:\.\d+)?|\.\d+)\s?([a-zA-Z]+)$/;

function invalid(code: 'TG_INVALID_SIZE', path: string, expected: string, value: unknown, fix: string): never {
  throw configError(code, { path, expected, received: describe(value), fix });
}

function checked(n: number, path: string, value: unknown, what: string, min: number): number {
  if (!Number.isFinite(n) || n < min || n > MAX_BYTES) {
    invalid(
      'TG_INVALID_SIZE',
      path,
      `${what} from ${min} byte${min === 1 ? '' : 's'} to 1 TiB`,
      value,
      n > MAX_BYTES ? 'Use a smaller value: at most 1TiB.' : `Use a positive value such as '16MB'${min === 0 ? ' (or 0)' : ''}.`,
    );
  }
  return n;
}

/** The number of bytes of a size string (without range checks), or throws TG_INVALID_SIZE. */
function bytesOf(text: string, path: string, value: unknown, forms: string): number {
  const m = SIZE.exec(text.trim());
  if (m === null) invalid('TG_INVALID_SIZE', path, forms, value, "Write a number and a unit, e.g. '16MB' or '512KiB'.");
  const unit = m[2] as string;
  // '2Mb', '512kb': the usual spelling of bits; refuse rather than be off by 8.
  if (unit.endsWith('b') && !unit.toLowerCase().endsWith('ib')) {
    invalid(
      'TG_INVALID_SIZE',
      path,
      forms,
      value,
      `Write bytes with a capital B ('${m[1]}${unit.slice(0, -1).toUpperCase()}B'); for bits, divide by 8.`,
    );
  }
  const factor = UNITS[unit.toLowerCase()];
  if (factor === undefined) invalid('TG_INVALID_SIZE', path, forms, value, 'Use one of the units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB.');
  return Math.round(Number(m[1]) * factor);
}

/**
 * A size in whole bytes, at least `min` (1, or 0 where nothing is a valid choice).
 * @throws TG_INVALID_SIZE for anything else (zero below `min`, a negative, NaN, more than 1 TiB, an unknown unit).
 * @example parseSize('16MB', 'burst') // 16_000_000
 * @example parseSize('2MiB', 'burst') // 2_097_152
 */
export function parseSize(value: unknown, path: string, min: 0 | 1 = 1): number {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) invalid('TG_INVALID_SIZE', path, SIZE_FORMS, value, 'Use a whole number of bytes.');
    return checked(value, path, value, 'a size', min);
  }
  if (typeof value !== 'string') invalid('TG_INVALID_SIZE', path, SIZE_FORMS, value, "Pass a number of bytes or a string such as '16MB'.");
  return checked(bytesOf(value, path, value, SIZE_FORMS), path, value, 'a size', min);
}

const RATE_FORMS = "a whole number of bytes per second, or a string such as '2MB/s', '512KiB/s' or '1 MB/sec'";

/**
 * A byte rate in whole bytes per second (at least 1).
 * @throws TG_INVALID_SIZE for anything else (zero, a negative, a missing `/s`, more than 1 TiB/s).
 * @example parseByteRate('2MB/s', 'rate') // 2_000_000
 */
export function parseByteRate(value: unknown, path: string): number {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) invalid('TG_INVALID_SIZE', path, RATE_FORMS, value, 'Use a whole number of bytes per second.');
    return checked(value, path, value, 'a rate', 1);
  }
  if (typeof value !== 'string') invalid('TG_INVALID_SIZE', path, RATE_FORMS, value, "Pass bytes per second or a string such as '2MB/s'.");
  const slash = value.lastIndexOf('/');
  const per = slash < 0 ? '' : value.slice(slash + 1).trim();
  if (per !== 's' && per !== 'sec' && per !== 'second') {
    invalid(
      'TG_INVALID_SIZE',
      path,
      RATE_FORMS,
      value,
      `Write the rate per second, e.g. '${slash < 0 ? value.trim() : value.slice(0, slash).trim()}/s'.`,
    );
  }
  return checked(bytesOf(value.slice(0, slash), path, value, RATE_FORMS), path, value, 'a rate', 1);
}
