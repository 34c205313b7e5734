/**
 * The CLI reads times with core's duration reader: the same units as a rule's durations
 * ('1 minute', '2h'), bare numbers as milliseconds, 0 allowed, and the same ambiguous
 * forms refused with the nearest spelling.
 */
import { CliError, parsePattern } from '@tollgate/cli';
import { describe, expect, it } from 'vitest';

const target = { rules: [{ name: 'r', rate: '10/s' as const }] };

function arrivalTimes(text: string): number[] {
  return parsePattern(text)
    .generate(target as never)
    .map((a) => a.t);
}

describe('CLI times', () => {
  it("the CLI had its own time reader, which refused '1minute' and '2seconds' that rules accept", () => {
    expect(arrivalTimes('burst 1 at 1minute')).toEqual([60_000]);
    expect(arrivalTimes('burst 2 at 0 over 2seconds')).toEqual([0, 1000]);
    expect(arrivalTimes('burst 1 at 250')).toEqual([250]);
    expect(arrivalTimes('burst 1 at 1.5s')).toEqual([1500]);
  });

  it('refuses ambiguous times with the reason and the nearest spelling', () => {
    for (const [text, why] of [
      ['burst 1 at 1M', /month to some readers/],
      ['burst 1 at 2minuts', /did you mean '2minutes'/],
      ['burst 1 at 1.5ms', /whole milliseconds/],
    ] as const) {
      let err: unknown;
      try {
        arrivalTimes(text);
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(CliError);
      expect((err as CliError).message, text).toMatch(why);
    }
  });
});

describe('CLI errors suggest the nearest spelling', () => {
  it('an unknown command, flag, algorithm or config section names the nearest known one', async () => {
    const { run } = await import('@tollgate/cli');
    const cases: [string[], string][] = [
      [['simulat'], "Did you mean 'simulate'?"],
      [['simulate', '--rat', '10/s'], "Did you mean '--rate'?"],
      [['simulate', '-a', 'token_bucket', '-r', '10/s', '-p', 'burst 1'], "Did you mean 'token-bucket'?"],
    ];
    for (const [args, hint] of cases) {
      let err = '';
      const code = await run(args, {
        stdout: () => undefined,
        stderr: (s: string) => {
          err += s;
        },
        readFile: () => Promise.reject(new Error('no files here')),
        writeFile: () => Promise.resolve(),
        now: () => 0,
        isTTY: false,
      });
      expect(code, args.join(' ')).not.toBe(0);
      expect(err, args.join(' ')).toContain(hint);
    }
  });
});
