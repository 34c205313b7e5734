/**
 * Consumer smoke tests (STYLE: express-rate-limit's test/external): the BUILT packages,
 * as a user installs them, imported from CommonJS and ESM, JavaScript and TypeScript,
 * and their package.json checked with publint. Requires `pnpm build` first (the test
 * command runs it).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));
const packages = Object.keys(JSON.parse(readFileSync(`${here}exports.json`, 'utf8')) as Record<string, string[]>);
const run = (cmd: string, args: string[], cwd = here) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: 'pipe' });

describe('built packages', () => {
  it('load from CommonJS', () => {
    expect(run(process.execPath, ['consumer.cjs'])).toContain('cjs ok true');
  });

  it('load from ESM', () => {
    expect(run(process.execPath, ['consumer.mjs'])).toContain('esm ok true');
  });

  it('type-check from TypeScript (node16, ESM and CJS)', { timeout: 120_000 }, () => {
    expect(() => run(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.json'])).not.toThrow();
  });

  it.each(packages)(
    '%s passes publint',
    (name) => {
      const dir = `${root}packages/${name.replace('@tollgate/', '')}`;
      const out = run(process.execPath, [`${root}node_modules/publint/src/cli.js`, '--strict'], dir);
      expect(out).not.toMatch(/error|warning/i);
    },
    120_000,
  );
});
