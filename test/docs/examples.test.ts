// Every example has a README, and what its README says it prints is what it prints.
//
// Each README shows its command as `node examples/<name>/<file>` in a `sh` block (the
// first such line counts). Two kinds are checked, both on loopback, bounded in time, and stopped by
// the test:
// - a program that ends by itself (a demo): the first `text` block after the command holds
//   lines that must each be a line of its output, in order; `…` in a line stands for any
//   run of characters (a figure that depends on timing);
// - a server (it prints its URL and keeps running): started with PORT=0, then every
//   `curl` line of the README that is followed by `#   Name: value` comment lines is sent
//   to it (its -H headers included) and each named response header must be there, with the
//   value written where it is fixed (r= and t= figures, which move with time, match any
//   number; `...` or `…` stands for any figure). The server is then killed.
// Every run starts 1.5 s before a whole hour (before-the-hour.mjs), so an output that depends on
// where a window boundary falls fails every run, not once in a while.
// The examples import the built packages: the test command builds them first.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { proseLines } from './markdown.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const examples = readdirSync(join(root, 'examples'), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort();
/** Examples whose README run needs another example running first: checked for a README only. */
const NEEDS_SERVER: Record<string, string> = { 'polite-client': 'runs against examples/express-stacked' };
const beforeTheHour = fileURLToPath(new URL('./before-the-hour.mjs', import.meta.url));
const built = existsSync(join(root, 'packages/express/dist/index.mjs')) && existsSync(join(root, 'packages/otel/dist/index.mjs'));

interface Block {
  lang: string;
  lines: string[];
}

/** The fenced blocks of a markdown text, in order. */
function blocks(text: string): Block[] {
  const out: Block[] = [];
  let current: Block | undefined;
  for (const line of text.split('\n')) {
    const fence = /^```(\w*)\s*$/.exec(line);
    if (fence) {
      if (current) {
        out.push(current);
        current = undefined;
      } else {
        current = { lang: fence[1] ?? '', lines: [] };
      }
    } else if (current) {
      current.lines.push(line);
    }
  }
  return out;
}

/** The README's `node examples/...` command and the index of the block holding it. */
function command(readme: string, name: string): { argv: string[]; block: number } | undefined {
  const all = blocks(readme);
  for (let i = 0; i < all.length; i++) {
    const b = all[i] as Block;
    if (b.lang !== 'sh') continue;
    for (const line of b.lines) {
      const m = new RegExp(`\\b(node examples/${name}/[\\w./-]+(?: --[a-z-]+)*)`).exec(line);
      if (m?.[1]) return { argv: m[1].split(' ').slice(1), block: i };
    }
  }
  return undefined;
}

/** A README line as a pattern: `…` matches anything. */
function linePattern(line: string): RegExp {
  return new RegExp(
    `^${line
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

interface CurlCheck {
  path: string;
  headers: Record<string, string>;
  expect: [name: string, value: string][];
}

/** `curl` lines followed by `#   Name: value` lines. */
function curlChecks(readme: string): CurlCheck[] {
  const out: CurlCheck[] = [];
  for (const b of blocks(readme)) {
    if (b.lang !== 'sh') continue;
    b.lines.forEach((line, i) => {
      const url = /curl .*?'?(https?:\/\/(?:localhost|127\.0\.0\.1):\d+(\/[^'\s]*))'?/.exec(line);
      if (!url?.[2]) return;
      const expected: [string, string][] = [];
      for (let j = i + 1; j < b.lines.length; j++) {
        const m = /^#\s{3}([A-Za-z-]+): (.*)$/.exec(b.lines[j] as string);
        if (!m?.[1] || m[2] === undefined) break;
        expected.push([m[1], m[2]]);
      }
      if (expected.length === 0) return;
      const headers: Record<string, string> = {};
      for (const h of line.matchAll(/-H '([^:']+): ([^']*)'/g)) headers[h[1] as string] = h[2] as string;
      out.push({ path: url[2], headers, expect: expected });
    });
  }
  return out;
}

/** A header value as a pattern: fixed where fixed, any number after `r=` and `t=`. */
function valuePattern(value: string): RegExp {
  const escaped = value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped.replace(/\b([rt])=\d+/g, '$1=\\d+').replace(/\\\.\\\.\\\.|…/g, '[^,]*')}$`);
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

/** Runs `node argv` in the repository root; resolves with its output when it exits, or its first URL if it is a server. */
function run(
  argv: string[],
  timeoutMs: number,
  env: Record<string, string> = { PORT: '0' },
  server = true,
): Promise<{ out: string; url?: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', beforeTheHour, ...argv], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms; output so far:\n${out}${err}`)), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk;
      const url = server ? /https?:\/\/(?:localhost|127\.0\.0\.1):\d+\//.exec(out) : null;
      if (url) {
        clearTimeout(timer);
        resolve({ out, url: url[0].replace('localhost', '127.0.0.1'), code: null });
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk;
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ out: out + err, code });
    });
    child.on('error', reject);
  });
}

describe('examples', () => {
  it('every example has a README that shows its command', () => {
    for (const name of examples) {
      const path = join(root, 'examples', name, 'README.md');
      expect(existsSync(path), `examples/${name}/README.md`).toBe(true);
      if (NEEDS_SERVER[name] !== undefined) continue;
      expect(command(readFileSync(path, 'utf8'), name), `the node command of examples/${name}`).toBeDefined();
    }
  });

  // An example that needs a server is run against it by its own test below.
  for (const name of examples.filter((n) => NEEDS_SERVER[n] === undefined)) {
    const path = join(root, 'examples', name, 'README.md');
    it.skipIf(!built || !existsSync(path))(`examples/${name} prints what its README says`, { timeout: 60_000 }, async () => {
      const readme = readFileSync(path, 'utf8');
      const cmd = command(readme, name);
      expect(cmd).toBeDefined();
      const { argv, block } = cmd as { argv: string[]; block: number };
      const result = await run(argv, 45_000);
      if (result.url === undefined) {
        expect(result.code, result.out).toBe(0);
        const text = blocks(readme)
          .slice(block + 1)
          .find((b) => b.lang === 'text');
        expect(text, 'a text block after the command with what it prints').toBeDefined();
        const wanted = (text as Block).lines.filter((l) => l.trim() !== '');
        expect(wanted.length).toBeGreaterThan(0);
        const got = result.out.split('\n');
        let at = 0;
        for (const line of wanted) {
          const re = linePattern(line);
          while (at < got.length && !re.test(got[at] as string)) at++;
          expect(at < got.length, `"${line}" in the output of ${argv.join(' ')}:\n${result.out}`).toBe(true);
          at++;
        }
      } else {
        const checks = curlChecks(readme);
        expect(checks.length, 'a curl line with the headers it prints').toBeGreaterThan(0);
        for (const check of checks) {
          const res = await fetch(new URL(check.path.slice(1), result.url), { headers: check.headers });
          await res.arrayBuffer();
          for (const [header, value] of check.expect) {
            expect(res.headers.get(header), `${header} of GET ${check.path}`).toMatch(valuePattern(value));
          }
        }
      }
    });
  }
});

// polite-client runs against express-stacked: the README's short run (a batch within alice's
// budget) is started against a server of its own and must end as the README says.
describe('examples/polite-client', () => {
  it.skipIf(!built)("finishes the README's short batch against express-stacked with nothing dropped", { timeout: 60_000 }, async () => {
    const readme = readFileSync(join(root, 'examples/polite-client/README.md'), 'utf8');
    const short = blocks(readme).find((b) => b.lang === 'sh' && b.lines.some((l) => /BATCH=\d+ node examples\/polite-client\//.test(l)));
    expect(short, 'a sh block with the short BATCH=n run').toBeDefined();
    const line = (short as Block).lines.find((l) => /BATCH=\d+ node examples\/polite-client\//.test(l)) as string;
    const batch = /BATCH=(\d+)/.exec(line)?.[1] as string;
    const server = await run(['examples/express-stacked/server.mjs'], 45_000);
    expect(server.url).toBeDefined();
    const client = await run(
      ['examples/polite-client/index.mjs'],
      45_000,
      { BASE_URL: (server.url as string).replace(/\/$/, ''), BATCH: batch },
      false,
    );
    expect(client.code, client.out).toBe(0);
    const text = blocks(readme).find((b, i, all) => b.lang === 'text' && all.indexOf(short as Block) < i);
    expect(text, 'a text block after the short run').toBeDefined();
    const wanted = (text as Block).lines.find((l) => l.includes('done:')) as string;
    // The line starts with the run's duration (shown as …); the rest is exact.
    expect(client.out).toContain(wanted.replace(/^…\s*/, ''));
  });
});

// A README line is found by pattern; the checker itself must refuse what differs.
describe('the README checks', () => {
  it('match a header with moving figures, and refuse a different policy', () => {
    const re = valuePattern('"ip";r=4;t=19');
    expect(re.test('"ip";r=3;t=7')).toBe(true);
    expect(re.test('"user";r=3;t=7')).toBe(false);
    expect(valuePattern('"ip";r=...;t=...').test('"ip";r=298;t=77')).toBe(true);
    expect(valuePattern('"ip";r=...;t=...').test('"ip";r=298;t=77, "user";r=1')).toBe(false);
    expect(linePattern('admitted … of 8').test('admitted 5 of 8')).toBe(true);
    expect(linePattern('admitted … of 8').test('refused 5 of 8')).toBe(false);
  });

  it('read prose lines outside code', () => {
    expect(proseLines('a\n```\nb\n```\nc')).toEqual(['a', '', '', '', 'c']);
  });
});
