import { CLI_ERROR_CODES, createProgress } from '@tollgate/cli';
import { describe, expect, it } from 'vitest';
import { cli } from './helpers.js';

describe('tollgate simulate / compare as a function', () => {
  it('prints the table, the totals and the busiest interval', async () => {
    const r = await cli(['simulate', '-a', 'fixed-window', '-r', '10/s', '-p', 'boundary', '--rows', 'all']);
    expect(r.code).toBe(0);
    const out = r.stdout();
    expect(out).toContain('policy: fixed-window: fixed-window 10 per 1 s');
    expect(out).toMatch(/#\s+arrival s\s+key\s+decision\s+delay ms\s+departure s\s+rule/);
    expect(out).toMatch(/20\s+1\.090\s+client\s+admitted\s+-\s+1\.090\s+-/);
    expect(out).toContain('requests: 20, admitted: 20 (delayed: 0), rejected: 0');
    expect(out).toContain('max admitted in any 1 s: 20 (from 0.900 s)');
  });

  it('shows delays, departures and the rejecting rule', async () => {
    const r = await cli(['simulate', '-a', 'leaky-queue', '-r', '2/s', '--queue', '6', '-p', 'burst 9 at 0']);
    expect(r.stdout()).toMatch(/6\s+0\.000\s+client\s+delayed\s+3000\s+3\.000\s+leaky-queue/);
    expect(r.stdout()).toMatch(/7\s+0\.000\s+client\s+rejected \(retry 500 ms\)\s+-\s+-\s+leaky-queue/);
    expect(r.stdout()).toContain('worst wait: 3000 ms');
  });

  it('--json for simulate: policy, arrivals, summary and one record per request', async () => {
    const r = await cli(['simulate', '-a', 'token-bucket', '-r', '10/s', '--burst', '5', '-p', 'burst 8 at 0', '--json', '-i', '500ms']);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout());
    expect(Object.keys(j)).toEqual(['command', 'policy', 'arrivals', 'summary', 'requests']);
    expect(j.command).toBe('simulate');
    expect(j.policy).toMatchObject({
      name: 'token-bucket',
      rules: [{ name: 'token-bucket', algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 5 }],
    });
    expect(j.arrivals).toEqual({ patterns: ['burst 8 at 0'], trace: null, count: 8 });
    expect(j.summary).toEqual({
      requests: 8,
      admitted: 5,
      delayed: 0,
      rejected: 3,
      intervalMs: 500,
      busiest: { count: 5, units: 5, from: 0 },
      worstWaitMs: 0,
      endMs: 0,
    });
    expect(j.requests).toHaveLength(8);
    expect(j.requests[5]).toEqual({
      i: 5,
      arrival: 0,
      key: 'client',
      cost: 1,
      decision: 'rejected',
      delayMs: 0,
      departure: null,
      rules: ['token-bucket'],
      retryAfterMs: 100,
    });
  });

  it('--json for compare, and the side-by-side table', async () => {
    const args = [
      'compare',
      '-a',
      'fixed-window,sliding-log,token-bucket,leaky-queue',
      '-r',
      '10/s',
      '--burst',
      '5',
      '--queue',
      '3',
      '-p',
      'boundary',
    ];
    const r = await cli([...args, '--json']);
    const j = JSON.parse(r.stdout());
    expect(j.command).toBe('compare');
    expect(j.intervalMs).toBe(1000);
    expect(
      j.policies.map((p: { name: string; summary: { admitted: number; busiest: { count: number } } }) => [
        p.name,
        p.summary.admitted,
        p.summary.busiest.count,
      ]),
    ).toEqual([
      ['fixed-window', 20, 20],
      ['sliding-log', 10, 10],
      // B=5 at 900..940 ms; refill 1 per 100 ms gives one more at 1000 ms
      ['token-bucket', 6, 6],
      // Q=3, T=100 ms: 900, 910, 920 leave at 1.0, 1.1, 1.2 s; at 1000 ms one place is free again
      ['leaky-queue', 4, 4],
    ]);
    // --burst applies to the token bucket only, --queue to the leaky queue only
    expect(j.policies[2].rules[0].burst).toBe(5);
    expect(j.policies[3].rules[0].queue).toBe(3);
    const t = await cli(args);
    expect(t.stdout()).toMatch(/policy\s+admitted\s+rejected\s+delayed\s+max in 1 s\s+worst wait ms/);
    expect(t.stdout()).toMatch(/fixed-window\s+20\s+0\s+0\s+20\s+0/);
    expect(t.stdout()).toMatch(/sliding-log\s+10\s+10\s+0\s+10\s+0/);
  });

  it('compare with sliding-buckets: --buckets sets its blocks, and its bound is L in W - b, not in W', async () => {
    // Blocks of 250 ms: 10 at 249 ms fill block 0, which leaves the window at 1000 ms, so
    // sliding-buckets admits 10 more 751 ms later (W - b + 1: inside a half-open 752 ms); the
    // log waits until 1249 ms.
    const args = ['compare', '-a', 'fixed-window,sliding-buckets,sliding-log', '-r', '10/s', '--buckets', '4'];
    const r = await cli([...args, '-p', 'burst 10 at 249', '-p', 'burst 10 at 1000', '-i', '752ms', '--json']);
    const j = JSON.parse(r.stdout());
    const rows = j.policies.map((p: { name: string; summary: { admitted: number; busiest: { count: number } } }) => [
      p.name,
      p.summary.admitted,
      p.summary.busiest.count,
    ]);
    expect(rows).toEqual([
      ['fixed-window', 20, 20],
      ['sliding-buckets', 20, 20],
      ['sliding-log', 10, 10],
    ]);
    expect(j.policies[1].rules[0].buckets).toBe(4);
    // One millisecond less apart: both bursts share a window of 4 blocks.
    const near = JSON.parse((await cli([...args, '-p', 'burst 10 at 250', '-p', 'burst 10 at 1000', '--json'])).stdout());
    expect(near.policies[1].summary.admitted).toBe(10);
    const t = await cli([...args, '-p', 'boundary']);
    expect(t.stdout()).toContain('sliding-buckets: sliding-buckets 10 per 1 s, 4 buckets');
    const bad = await cli(['simulate', '-a', 'sliding-buckets', '-r', '10/s', '--buckets', '7', '-p', 'boundary']);
    expect(bad.code).toBe(2);
    expect(bad.stderr()).toContain('TG_INVALID_OPTION');
    expect(bad.stderr()).toContain('buckets: 5');
  });

  it('writes an SVG timeline with every request, coloured by outcome', async () => {
    const r = await cli(['simulate', '-a', 'leaky-queue', '-r', '2/s', '--queue', '6', '-p', 'burst 9 at 0', '--svg', 'out.svg']);
    const svg = r.written.get('out.svg') as string;
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.match(/data-decision="delayed"/g)).toHaveLength(6);
    expect(svg.match(/data-decision="rejected"/g)).toHaveLength(3);
    expect(svg).toContain('>3 s</text>'); // axis in seconds
    expect(svg).toContain('delayed (arrival → departure)'); // legend
    const c = await cli(['compare', '-r', '10/s', '-p', 'burst 20 at 0', '--svg', 'c.svg']);
    const csvg = c.written.get('c.svg') as string;
    expect(csvg.match(/<g data-decision=/g)).toHaveLength(5 * 20);
  });

  it('replays a CSV trace with per-request costs', async () => {
    const r = await cli(['simulate', '-a', 'sliding-log', '--limit', '5', '--window', '1s', '--trace', 't.csv', '--json'], {
      't.csv': 'time,key,cost\n0,a,3\n10,a,3\n20,b,5\n1000,a,2\n',
    });
    const j = JSON.parse(r.stdout());
    expect(j.requests.map((q: { decision: string }) => q.decision)).toEqual(['admitted', 'rejected', 'admitted', 'admitted']);
    expect(j.summary.busiest).toEqual({ count: 2, units: 8, from: 0 });
  });

  it('runs a stack from a YAML config (global key, the same rule objects)', async () => {
    const yaml =
      'rules:\n  - { name: client, rate: 5/s, algorithm: fixed-window }\n  - { name: all, key: global, rate: 8/s, algorithm: fixed-window }\npatterns: ["burst 12 at 0 keys 2"]\n';
    const r = await cli(['simulate', '-c', 'p.yaml', '--json'], { 'p.yaml': yaml });
    const j = JSON.parse(r.stdout());
    expect(j.policy.name).toBe('p');
    expect(j.summary).toMatchObject({ admitted: 8, rejected: 4 });
    expect(j.requests[8].rules).toEqual(['all']);
  });

  it('throttle: the SPEC 8.1 example (two at once, three after 5 s, none refused)', async () => {
    const r = await cli(['simulate', '-c', 't.yaml', '-p', 'burst 5 at 0', '--json'], {
      't.yaml': 'throttle: { window: 10s, delayAfter: 2, delay: 5000 }\n',
    });
    const j = JSON.parse(r.stdout());
    expect(j.requests.map((q: { departure: number }) => q.departure)).toEqual([0, 0, 5000, 5000, 5000]);
    expect(j.requests[2].rules).toEqual(['slow-down']);
    expect(j.summary).toMatchObject({ admitted: 5, delayed: 3, rejected: 0 });
    expect(j.policy.throttle).toEqual({ window: '10s', delayAfter: 2, delay: 5000, key: 'client' });
  });

  it('throttle then limiter: the limiter counts at processing time, so an earlier arrival can be the one refused', async () => {
    const yaml = [
      'throttle: { window: 10s, delayAfter: 1, delay: 500 }',
      'rules: [{ name: all, key: global, limit: 2, window: 1s, algorithm: sliding-log }]',
    ].join('\n');
    const r = await cli(['simulate', '-c', 't.yaml', '--trace', 'a.csv', '--json'], { 't.yaml': yaml, 'a.csv': '0,a\n10,a\n100,b\n' });
    const j = JSON.parse(r.stdout());
    // a's second request (10 ms) is held until 510 ms; b's first (100 ms) reaches the limit first.
    expect(j.requests.map((q: { key: string; decision: string; rules: string[] }) => [q.key, q.decision, q.rules])).toEqual([
      ['a', 'admitted', []],
      ['a', 'rejected', ['all']],
      ['b', 'admitted', []],
    ]);
  });

  it('compares named policies from JSON config files', async () => {
    const a = JSON.stringify({
      policies: {
        strict: [{ name: 'c', rate: '10/s', algorithm: 'sliding-log' }],
        loose: [{ name: 'c', rate: '10/s', algorithm: 'fixed-window' }],
      },
    });
    const r = await cli(['compare', '-c', 'a.json', '-p', 'boundary', '--json'], { 'a.json': a });
    const j = JSON.parse(r.stdout());
    expect(j.policies.map((p: { name: string; summary: { busiest: { count: number } } }) => [p.name, p.summary.busiest.count])).toEqual([
      ['strict', 10],
      ['loose', 20],
    ]);
  });
});

describe('help', () => {
  it.each([
    [['--help'], 'tollgate simulate [options]'],
    [[], 'tollgate compare [options]'],
    [['help', 'simulate'], 'Usage: tollgate simulate'],
    [['simulate', '--help'], 'Usage: tollgate simulate'],
    [['simulate', '-h'], 'boundary [N] [at T] [span D]'],
    [['compare', '--help'], 'Usage: tollgate compare'],
    [['help', 'compare'], '--algorithms'],
  ])('%j prints help', async (argv, text) => {
    const r = await cli(argv);
    expect(r.code).toBe(0);
    expect(r.stdout()).toContain(text);
  });
});

it('--version prints the package version', async () => {
  const { readFile } = await import('node:fs/promises');
  const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8'));
  const r = await cli(['--version']);
  expect(r.stdout()).toBe(`${pkg.version}\n`);
});

describe('errors', () => {
  it.each([
    [['launch'], 'TG_CLI_UNKNOWN_COMMAND', /expected a command: simulate, compare, keys, rate-timeline or help/],
    [['simulate', '-r', '10/s', '-p', 'boundary', '--speed', '2'], 'TG_CLI_INVALID_ARGUMENT', /Unknown option '--speed'/],
    [['simulate', '-r', '10/s'], 'TG_CLI_INVALID_ARGUMENT', /arrivals: --pattern or --trace/],
    [['simulate', '-p', 'boundary'], 'TG_CLI_INVALID_ARGUMENT', /--rate 10\/s, or --limit 10 --window 1s/],
    [['simulate', '-a', 'magic', '-r', '10/s', '-p', 'boundary'], 'TG_CLI_INVALID_ARGUMENT', /one of fixed-window, sliding-log/],
    [['simulate', '-r', '10/x', '-p', 'boundary'], 'TG_INVALID_RATE', /'<count>\/<period>'/],
    [
      ['simulate', '-a', 'sliding-log', '-r', '10/s', '--burst', '3', '-p', 'boundary'],
      'TG_INVALID_OPTION',
      /burst only on a token-bucket or leaky-bucket meter rule/,
    ],
    [['simulate', '--limit', '0', '--window', '1s', '-p', 'boundary'], 'TG_INVALID_LIMIT', /positive whole number/],
    [['simulate', '-r', '10/s', '-p', 'boundary', '-i', '0'], 'TG_CLI_INVALID_ARGUMENT', /--interval/],
    [['simulate', '-r', '10/s', '--trace', 'missing.csv'], 'TG_CLI_INVALID_TRACE', /ENOENT/],
    [['compare', '-a', 'fixed-window,fixed-window', '-r', '10/s', '-p', 'boundary'], 'TG_CLI_INVALID_ARGUMENT', /distinct names/],
    // bug: the last of two values was used silently
    [
      ['simulate', '-r', '10/s', '-r', '20/s', '-p', 'boundary'],
      'TG_CLI_INVALID_ARGUMENT',
      /--rate: expected one value, received "10\/s" and "20\/s"/,
    ],
  ])('%j → %s', async (argv, code, message) => {
    const r = await cli(argv);
    expect(r.code).toBe(2);
    expect(r.stderr()).toContain(`tollgate: ${code}: `);
    expect(r.stderr()).toMatch(message);
    expect(r.stdout()).toBe('');
  });

  it.each([
    [
      'bad.yaml',
      'rules:\n  - { name: x, rate: 10/s, algorithm: sliding-logg }\n',
      'TG_UNKNOWN_ALGORITHM',
      'bad.yaml rules[0] "x".algorithm: expected one of',
    ],
    ['bad.yaml', 'rules:\n  - { name: x, rate: 10/s, key: user }\n', 'TG_CLI_INVALID_CONFIG', 'bad.yaml rules[0].key: expected "client"'],
    ['bad.yaml', 'rules:\n  - { name: x, rate: 10/s }\n  - { name: x, rate: 20/s }\n', 'TG_DUPLICATE_RULE', 'bad.yaml rules[1].name'],
    ['bad.yaml', 'rules:\n  - { name: x, rate: 10/s, cost: 20 }\n', 'TG_INVALID_COST', 'whole number from 1 to 10'],
    ['bad.yaml', 'rules: [ { name: x\n', 'TG_CLI_INVALID_CONFIG', 'expected valid YAML (or JSON), received a syntax error'],
    ['bad.json', '{"rules": [}', 'TG_CLI_INVALID_CONFIG', 'expected valid JSON'],
    [
      'bad.yaml',
      'rule:\n  - { name: x, rate: 10/s }\n',
      'TG_CLI_INVALID_CONFIG',
      'bad.yaml rule: expected rules, throttle, policies, patterns or interval',
    ],
    ['bad.yaml', 'rules: []\n', 'TG_NO_RULES', 'a non-empty array of rules'],
    ['bad.yaml', 'throttle: { window: 10s, delayAfter: -1 }\n', 'TG_INVALID_LIMIT', 'bad.yaml throttle.delayAfter'],
    [
      'bad.yaml',
      'throttle: { window: 10s, delayAfter: 1, delay: "(h) => h" }\n',
      'TG_CLI_INVALID_CONFIG',
      'bad.yaml throttle.delay: expected',
    ],
    ['bad.yaml', 'throttle: { window: 10s, delayAfter: 1, skip: true }\n', 'TG_CLI_INVALID_CONFIG', 'bad.yaml throttle.skip: expected'],
  ])('config %s %j → %s', async (file, text, code, message) => {
    const r = await cli(['simulate', '-c', file, '-p', 'burst 3 at 0', '--json'], { [file]: text });
    expect(r.code).toBe(2);
    expect(r.stderr()).toContain(`tollgate: ${code}: `);
    expect(r.stderr()).toContain(message);
    // with --json, scripts get the error as JSON on stdout too
    expect(JSON.parse(r.stdout()).error).toMatchObject({ code });
  });

  it('every CLI error code is documented in docs/cli.md', async () => {
    const { readFile } = await import('node:fs/promises');
    const doc = await readFile(new URL('../../../docs/cli.md', import.meta.url), 'utf8');
    for (const code of Object.keys(CLI_ERROR_CODES)) expect(doc, code).toContain(`\`${code}\``);
  });
});

describe('progress indicator', () => {
  it('stays silent for a second, then reports on stderr', () => {
    let now = 0;
    const lines: string[] = [];
    const p = createProgress({ write: (t) => lines.push(t), now: () => now, tty: false });
    p.update(10, 100);
    now = 900;
    p.update(20, 100);
    expect(lines).toEqual([]);
    now = 1200;
    p.update(50, 100);
    now = 1300;
    p.update(60, 100); // too soon after the last line for a non-terminal
    now = 3300;
    p.update(90, 100);
    p.finish();
    expect(lines).toEqual([
      'simulating: 50% (50 of 100 requests, 1.2 s)\n',
      'simulating: 90% (90 of 100 requests, 3.3 s)\n',
      'simulating: done in 3.3 s\n',
    ]);
  });

  it('redraws one line on a terminal and clears it at the end', () => {
    let now = 0;
    const out: string[] = [];
    const p = createProgress({ write: (t) => out.push(t), now: () => now, tty: true });
    now = 1500;
    p.update(1, 4);
    p.finish();
    expect(out).toEqual(['\rsimulating: 25% (1 of 4 requests, 1.5 s)\x1b[K', '\r\x1b[K']);
  });

  it('a quick run prints nothing on stderr', async () => {
    const r = await cli(['simulate', '-r', '10/s', '-p', 'burst 3 at 0']);
    expect(r.stderr()).toBe('');
  });

  it('a long run reports progress through the CLI', async () => {
    const { fakeIo } = await import('./helpers.js');
    const { run } = await import('@tollgate/cli');
    const f = fakeIo();
    // every clock read moves time 600 ms, so the run "lasts" long enough to be reported
    const io = {
      ...f.io,
      now: () => {
        f.tick(600);
        return f.io.now();
      },
    };
    const code = await run(['compare', '-a', 'sliding-window,token-bucket', '-r', '10/s', '-p', 'rate 1000/s for 10s', '--json'], {
      ...io,
    });
    expect(code).toBe(0);
    expect(f.stderr()).toMatch(/simulating: \d+% \(\d+ of 20000 requests/);
    expect(f.stderr()).toMatch(/simulating: done/);
  });
});
