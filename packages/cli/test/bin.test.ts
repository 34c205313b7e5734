/**
 * The real command: `bin/tollgate.js` as a child process on the built package
 * (`pnpm build` runs before the suite; see the root `test` script).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const bin = fileURLToPath(new URL('../bin/tollgate.js', import.meta.url));
const exec = promisify(execFile);

describe('bin/tollgate.js (built dist, child process)', () => {
  it('simulates the boundary attack and writes the SVG', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tollgate-cli-'));
    try {
      const svg = join(dir, 'b.svg');
      const { stdout, stderr } = await exec(process.execPath, [
        bin,
        'simulate',
        '-a',
        'fixed-window',
        '-r',
        '10/s',
        '-p',
        'boundary',
        '--json',
        '--svg',
        svg,
      ]);
      expect(stderr).toBe('');
      const j = JSON.parse(stdout);
      expect(j.summary.busiest.count).toBe(20);
      expect((await readFile(svg, 'utf8')).match(/data-decision="admitted"/g)).toHaveLength(20);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('exits 2 with the error code on a bad rule', async () => {
    const err = await exec(process.execPath, [
      bin,
      'simulate',
      '-a',
      'sliding-log',
      '--limit',
      '2.5',
      '--window',
      '1s',
      '-p',
      'boundary',
    ]).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).toBe(2);
    expect(err?.stderr).toMatch(/^tollgate: TG_INVALID_LIMIT: flags\[0\] "sliding-log"\.limit/);
  });
});
