import { CliError, parseTrace } from '@tollgate/cli';
import { describe, expect, it } from 'vitest';

describe('CSV traces', () => {
  it('reads time,key,cost with a header, comments, quotes and defaults', () => {
    const text = 'time,key,cost\n# warm-up\n0,alice,1\n\n250,"bob, jr",3\n1.5s,,\n1500\n';
    expect(parseTrace(text, 't.csv')).toEqual([
      { t: 0, key: 'alice', cost: 1 },
      { t: 250, key: 'bob, jr', cost: 3 },
      { t: 1500, key: 'client', cost: 1 },
      { t: 1500, key: 'client', cost: 1 },
    ]);
    expect(parseTrace('0,"say ""hi""",1\r\n', 'q.csv')).toEqual([{ t: 0, key: 'say "hi"', cost: 1 }]);
  });

  it('reads an actual cost in a fourth field (a reserve settled at it), absent when empty', () => {
    expect(parseTrace('0,alice,5,12\n10,alice,5,\n20,bob,5,0\n', 't.csv')).toEqual([
      { t: 0, key: 'alice', cost: 5, actual: 12 },
      { t: 10, key: 'alice', cost: 5 },
      { t: 20, key: 'bob', cost: 5, actual: 0 },
    ]);
  });

  it.each([
    ['time,key\n0,a\nsoon,b\n', 't.csv:3', /a time in whole ms/],
    ['100,a\n50,b\n', 't.csv:2', /at least 100 ms/],
    ['0,a,0\n', 't.csv:1', /positive whole number/],
    ['0,a,1.5\n', 't.csv:1', /positive whole number/],
    ['0,a,1,2,extra\n', 't.csv:1', /at most four fields/],
    ['0,a,1,-2\n', 't.csv:1', /actual cost that is a whole number/],
    ['0,a,1,2.5\n', 't.csv:1', /actual cost that is a whole number/],
    ['0,"open,1\n', 't.csv:1', /closed quotes/],
    ['time,key,cost\n# nothing\n', 't.csv', /at least one request line/],
  ])('refuses %j at %s', (text, path, message) => {
    let err: unknown;
    try {
      parseTrace(text, 't.csv');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).code).toBe('TG_CLI_INVALID_TRACE');
    expect((err as CliError).path).toBe(path);
    expect((err as CliError).message).toMatch(message);
  });
});
