#!/usr/bin/env node
/**
 * Keeps every published package in packages/* alike: the build and prepack scripts, the dist layout in
 * main/module/types/exports/files, author, repository, homepage, bugs, and the LICENSE and
 * CHANGELOG.md beside it.
 *
 *   node scripts/package-metadata.mjs          check: lists what differs, exits 1 if anything does
 *   node scripts/package-metadata.mjs --fix    writes the fields and copies LICENSE, starts a CHANGELOG.md
 *
 * What it cannot write is said and left to a person: a README.md (install, the smallest
 * working use, a link to the docs) and `keywords`.
 */
import { copyFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const fix = process.argv.includes('--fix');
const REPO = 'https://github.com/tollgate/tollgate';
const license = readFileSync(join(root, 'LICENSE'), 'utf8');

/** The fields every package has, in the order they are written after `license`. */
function expected(short, pkg) {
  // Subpaths are the package's to declare (`"./http": ...` in exports, built from
  // src/http/index.ts); their shape is the same as the main entry's.
  const subpaths = Object.keys(pkg.exports ?? {})
    .filter((k) => k !== '.' && k !== './package.json')
    .map((k) => k.slice(2));
  const entry = (name) => ({
    import: { types: `./dist/${name}.d.mts`, default: `./dist/${name}.mjs` },
    require: { types: `./dist/${name}.d.cts`, default: `./dist/${name}.cjs` },
  });
  return {
    author: 'tollgate contributors',
    repository: { type: 'git', url: `git+${REPO}.git`, directory: `packages/${short}` },
    homepage: `${REPO}/tree/main/packages/${short}#readme`,
    bugs: { url: `${REPO}/issues` },
    main: './dist/index.cjs',
    module: './dist/index.mjs',
    types: './dist/index.d.cts',
    // TypeScript's node10 resolution reads no exports map: point it at the subpaths' types.
    ...(subpaths.length ? { typesVersions: { '*': Object.fromEntries(subpaths.map((s) => [s, [`./dist/${s}/index.d.cts`]])) } } : {}),
    exports: {
      '.': entry('index'),
      ...Object.fromEntries(subpaths.map((s) => [`./${s}`, entry(`${s}/index`)])),
      './package.json': './package.json',
    },
    files: pkg.bin ? ['dist', 'bin', 'CHANGELOG.md'] : ['dist', 'CHANGELOG.md'],
    // Packing (and so publishing) builds what is stale first: a JavaScript-only build
    // (`pnpm start`) must not reach a tarball without its declarations.
    scripts: { ...pkg.scripts, build: 'tsdown -c ../../tsdown.config.mjs', prepack: 'node ../../scripts/build.mjs .' },
  };
}

const problems = [];
for (const short of readdirSync(join(root, 'packages')).sort()) {
  const dir = join(root, 'packages', short);
  const file = join(dir, 'package.json');
  if (!existsSync(file)) continue;
  const pkg = JSON.parse(readFileSync(file, 'utf8'));
  if (pkg.private) continue;
  const want = expected(short, pkg);
  const differs = Object.keys(want).filter((k) => JSON.stringify(pkg[k]) !== JSON.stringify(want[k]));
  if (differs.length) {
    if (fix) {
      // Fields already there keep their place; the missing ones follow `license`.
      const missing = Object.fromEntries(Object.entries(want).filter(([k]) => !(k in pkg)));
      const out = {};
      for (const [k, v] of Object.entries(pkg)) {
        out[k] = k in want ? want[k] : v;
        if (k === 'license') Object.assign(out, missing);
      }
      if (!('license' in pkg)) Object.assign(out, missing);
      writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
    } else problems.push(`${pkg.name}: package.json ${differs.join(', ')}`);
  }
  if (!Array.isArray(pkg.keywords) || pkg.keywords.length === 0) problems.push(`${pkg.name}: package.json has no keywords`);
  if (pkg.license !== 'MIT') problems.push(`${pkg.name}: license is not MIT`);
  const licensePath = join(dir, 'LICENSE');
  if (!existsSync(licensePath) || readFileSync(licensePath, 'utf8') !== license) {
    if (fix) copyFileSync(join(root, 'LICENSE'), licensePath);
    else problems.push(`${pkg.name}: LICENSE missing or not the root's`);
  }
  const changelog = join(dir, 'CHANGELOG.md');
  if (!existsSync(changelog)) {
    if (fix) writeFileSync(changelog, `# ${pkg.name}\n\n## ${pkg.version}\n\nThe first release.\n`);
    else problems.push(`${pkg.name}: CHANGELOG.md missing`);
  }
  if (!existsSync(join(dir, 'tsconfig.build.json'))) problems.push(`${pkg.name}: tsconfig.build.json missing`);
  if (!existsSync(join(dir, 'README.md'))) problems.push(`${pkg.name}: README.md missing (install, smallest use, docs link)`);
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(fix ? 'package metadata written' : 'package metadata as expected');
