/**
 * Packing cannot ship a package without its declarations. `pnpm start` builds JavaScript
 * only; a `pnpm pack` (or `pnpm publish`, or `pnpm -r pack`) after it used to write
 * tarballs with no .d.mts/.d.cts and say nothing. Each package's `prepack` now runs the
 * build for it (declarations included when stale). Checked on a copy of the workspace
 * holding @tollgate/core alone (the package every other one depends on), so the real
 * checkout's dist/, which other suites read, is left alone.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { packages, root, run } from './packed.js';

let copy: string | undefined;
afterAll(() => {
  if (copy) rmSync(copy, { recursive: true, force: true });
});

/** A workspace beside the real one: its configs, the build script, one package, and the real dependencies linked in. */
function workspaceWith(short: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-prepack-'));
  for (const f of ['package.json', 'tsconfig.base.json', 'tsdown.config.mjs', 'LICENSE', 'scripts/build.mjs']) {
    cpSync(join(root, f), join(dir, f));
  }
  writeFileSync(join(dir, 'pnpm-workspace.yaml'), 'packages:\n  - packages/*\n');
  // node_modules entry by entry, so that the copy's build cache and lock are its own.
  mkdirSync(join(dir, 'node_modules'));
  for (const entry of readdirSync(join(root, 'node_modules'))) {
    if (entry !== '.cache') symlinkSync(join(root, 'node_modules', entry), join(dir, 'node_modules', entry));
  }
  cpSync(join(root, 'packages', short), join(dir, 'packages', short), {
    recursive: true,
    verbatimSymlinks: true,
    filter: (src) => !/[/\\](dist|\.cache)$/.test(src),
  });
  return dir;
}

it('every package packs its declarations after a JavaScript-only build (prepack builds what is stale)', { timeout: 180_000 }, async () => {
  for (const p of packages) expect(p.manifest, p.name).toHaveProperty('scripts.prepack', 'node ../../scripts/build.mjs .');
  copy = workspaceWith('core');
  const core = join(copy, 'packages/core');
  await run(process.execPath, ['scripts/build.mjs', '--js'], copy, 60_000);
  expect(existsSync(join(core, 'dist/index.mjs'))).toBe(true);
  expect(existsSync(join(core, 'dist/index.d.mts'))).toBe(false);

  await run('pnpm', ['pack', '--pack-destination', join(copy, 'out')], core, 150_000);
  const [tarball] = readdirSync(join(copy, 'out'));
  const listing = await run('tar', ['-tzf', join(copy, 'out', tarball ?? '')], copy);
  const files = listing.split('\n').map((l) => l.replace(/^package\//, ''));
  const manifest = packages.find((p) => p.short === 'core')?.manifest;
  const types = JSON.stringify(manifest?.exports).match(/\.\/dist\/[\w/]+\.d\.[mc]ts/g) ?? [];
  expect(types.length).toBeGreaterThanOrEqual(2);
  for (const t of types) expect(files, t).toContain(t.slice(2));
});
