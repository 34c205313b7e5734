/**
 * HTTP-date parsing (RFC 9110 section 5.6.7).
 *
 * Recipients must accept all three formats: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
 * the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
 * (`Sun Nov  6 08:49:37 1994`). `Date.parse` is deliberately not used: it accepts
 * many strings that are not HTTP-dates (`"12"`, local-time forms) and would turn junk
 * into a plausible wait.
 */

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const MON = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

const IMF = new RegExp(`^${DAY}, (\\d{2}) ${MON} (\\d{4}) ${TIME} gmt$`);
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MON}-(\\d{2}) ${TIME} gmt$`);
const ASCTIME = new RegExp(`^${DAY} ${MON} ([ \\d]\\d) ${TIME} (\\d{4})$`);

function build(year: number, month: string, day: number, h: number, m: number, s: number): number | undefined {
  const mi = MONTHS.indexOf(month);
  // 60 is allowed for a leap second (RFC 9110 keeps it); it rolls into the next minute.
  if (mi < 0 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60) return undefined;
  const t = Date.UTC(year, mi, day, h, m, s);
  // Reject dates such as 31 Feb that Date.UTC would silently roll over.
  if (new Date(Date.UTC(year, mi, day)).getUTCDate() !== day) return undefined;
  return t;
}

/**
 * Parses an HTTP-date to epoch milliseconds, or `undefined` when the value is not one.
 * @example parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT') // 784111777000
 */
export function parseHttpDate(value: string): number | undefined {
  if (value.length > 64) return undefined;
  const v = value.trim().toLowerCase();
  let m = IMF.exec(v);
  if (m) return build(Number(m[3]), m[2] as string, Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  m = RFC850.exec(v);
  if (m) {
    // RFC 9110: a two-digit year more than 50 years in the future means the past century.
    const yy = Number(m[3]);
    const nowYear = new Date().getUTCFullYear();
    let year = Math.floor(nowYear / 100) * 100 + yy;
    if (year > nowYear + 50) year -= 100;
    return build(year, m[2] as string, Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  }
  m = ASCTIME.exec(v);
  if (m) return build(Number(m[6]), m[1] as string, Number((m[2] as string).trim()), Number(m[3]), Number(m[4]), Number(m[5]));
  return undefined;
}
