#!/usr/bin/env node
/**
 * `changeset status` for the test command: fails when this branch changes a published
 * package (packages/*) and adds no changeset, and when a changeset or the config is wrong.
 *
 * `changeset status` compares HEAD with the local branch named by .changeset/config.json
 * (`main`) and errors out when that branch does not exist ("Failed to find where HEAD
 * diverged from main"): a clone whose checkout is another branch has only `origin/main`.
 * So: the local `main` when there is one (CI's clone of main, where the comparison is with
 * itself and only the changesets themselves are checked), else `--since=origin/main`.
 * Without either there is nothing to compare with, and that is said and fails.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const base = JSON.parse(readFileSync(new URL('../.changeset/config.json', import.meta.url), 'utf8')).baseBranch;

const exists = (ref) => {
  try {
    execFileSync('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { cwd: root, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

const args = ['status'];
if (!exists(base)) {
  const remote = `origin/${base}`;
  if (!exists(remote)) {
    console.error(
      `changeset status: neither "${base}" nor "${remote}" exists in this checkout, so there is nothing to compare with.\n` +
        `Fetch it (git fetch origin ${base}:${base}) or run \`pnpm changeset status --since=<ref>\`.`,
    );
    process.exit(1);
  }
  args.push(`--since=${remote}`);
}
const bin = fileURLToPath(new URL('../node_modules/@changesets/cli/bin.js', import.meta.url));
const result = spawnSync(process.execPath, [bin, ...args], { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
