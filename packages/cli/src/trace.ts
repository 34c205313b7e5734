/**
 * CSV traces: replay recorded arrivals.
 *
 * One request per line, `time,key,cost,actual`: time in ms (or with a unit, `1.5s`), key
 * optional (default `client`), cost optional (default 1), actual optional: the cost the
 * request turned out to have, when `cost` was an estimate (reserved, then settled at once). A first line naming the
 * columns is skipped, as are blank lines and lines starting with `#`. A field may be
 * double-quoted (`"a,b"`, with `""` for a quote). Times must not go backwards: a
 * shuffled trace is almost always a mistake worth hearing about.
 */
import type { Arrival } from './arrivals.js';
import { cliError, show } from './errors.js';
import { parseTime } from './time.js';

/** Splits one CSV line; returns undefined when a quote is left open. */
function fields(line: string): string[] | undefined {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    let value = '';
    if (line[i] === '"') {
      i++;
      for (;;) {
        if (i >= line.length) return undefined;
        if (line[i] === '"') {
          if (line[i + 1] === '"') {
            value += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        value += line[i];
        i++;
      }
      const rest = line.indexOf(',', i);
      if (line.slice(i, rest === -1 ? undefined : rest).trim() !== '') return undefined;
      i = rest === -1 ? line.length : rest;
    } else {
      const end = line.indexOf(',', i);
      value = line.slice(i, end === -1 ? undefined : end).trim();
      i = end === -1 ? line.length : end;
    }
    out.push(value);
    if (i >= line.length) return out;
    i++; // the comma
  }
}

const HEADER = /^\s*"?time"?\s*(,|$)/i;

/**
 * Parses a CSV trace.
 * @param name the file name, used in error messages (`trace.csv:12`)
 * @throws CliError TG_CLI_INVALID_TRACE, naming the line
 */
export function parseTrace(text: string, name = 'trace'): Arrival[] {
  const out: Arrival[] = [];
  const lines = text.split(/\r?\n/);
  let last = 0;
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n] as string;
    const path = `${name}:${n + 1}`;
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    if (out.length === 0 && HEADER.test(line)) continue;
    const f = fields(line);
    if (f === undefined || f.length > 4) {
      throw cliError('TG_CLI_INVALID_TRACE', {
        path,
        expected: 'time,key,cost,actual with at most four fields and closed quotes',
        received: show(line),
        fix: 'Write one request per line, e.g. 1250,alice,1.',
      });
    }
    const [time = '', key = '', costText = '', actualText = ''] = f;
    let t: number;
    try {
      t = parseTime(time, path);
    } catch (err) {
      throw cliError(
        'TG_CLI_INVALID_TRACE',
        {
          path,
          expected: 'a time in whole ms (or with a unit, such as 1.5s) in the first field',
          received: show(time),
          fix: 'Times are measured from the start of the trace.',
        },
        err,
      );
    }
    if (t < last) {
      throw cliError('TG_CLI_INVALID_TRACE', {
        path,
        expected: `a time of at least ${last} ms (the previous line's)`,
        received: `${t} ms`,
        fix: 'Sort the trace by time (e.g. `sort -t, -k1,1n trace.csv`).',
      });
    }
    last = t;
    const cost = costText === '' ? 1 : Number(costText);
    if (!Number.isSafeInteger(cost) || cost <= 0) {
      throw cliError('TG_CLI_INVALID_TRACE', {
        path,
        expected: 'a cost that is a positive whole number (or empty for 1) in the third field',
        received: show(costText),
        fix: 'Costs are whole units, like rule costs.',
      });
    }
    if (key.length > 256) {
      throw cliError('TG_CLI_INVALID_TRACE', {
        path,
        expected: 'a key of at most 256 characters',
        received: `${key.length} characters`,
        fix: 'Shorten the key.',
      });
    }
    const actual = actualText === '' ? undefined : Number(actualText);
    if (actual !== undefined && !(Number.isSafeInteger(actual) && actual >= 0)) {
      throw cliError('TG_CLI_INVALID_TRACE', {
        path,
        expected: 'an actual cost that is a whole number of at least 0 (or empty) in the fourth field',
        received: show(actualText),
        fix: 'The fourth field is what the request really cost, when its cost was an estimate.',
      });
    }
    out.push(actual === undefined ? { t, key: key === '' ? 'client' : key, cost } : { t, key: key === '' ? 'client' : key, cost, actual });
  }
  if (out.length === 0) {
    throw cliError('TG_CLI_INVALID_TRACE', {
      path: name,
      expected: 'at least one request line',
      received: 'none',
      fix: 'Add lines of time,key,cost.',
    });
  }
  return out;
}
