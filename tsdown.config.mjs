// One build for every package in packages/*: ESM, CommonJS and declarations in one pass
// (tsdown on rolldown; the declarations come from the TypeScript compiler, so they are
// what tsc would emit, bundled into one file per entry and format). Dependencies and
// peers stay external. `node scripts/build.mjs` runs this for each package that changed,
// in dependency order; `pnpm --filter <pkg> build` for one.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'tsdown';

/**
 * The entries of a package, from its package.json `exports`: `.` is src/index.ts built to
 * dist/index.*, a subpath `./name` is src/name/index.ts built to dist/name/index.*. Code the
 * entries share goes to one chunk per format, so a subpath and the main entry see the same
 * classes and state.
 */
export function packageEntries(cwd) {
  const pkg = JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8'));
  const subpaths = Object.keys(pkg.exports ?? { '.': null }).filter((k) => k !== './package.json');
  return Object.fromEntries(
    subpaths.map((k) => (k === '.' ? ['index', 'src/index.ts'] : [`${k.slice(2)}/index`, `src/${k.slice(2)}/index.ts`])),
  );
}

/** The options shared by every package; `cwd` is the package's folder. */
export const packageConfig = (cwd) => ({
  cwd,
  entry: packageEntries(cwd),
  format: ['esm', 'cjs'],
  platform: 'node',
  target: 'node20',
  tsconfig: 'tsconfig.build.json',
  outDir: 'dist',
  // dist/index.mjs + index.d.mts for import, dist/index.cjs + index.d.cts for require;
  // shared chunks are named after their module, without a content hash.
  fixedExtension: true,
  hash: false,
  dts: true,
  clean: true,
  sourcemap: false,
  report: false,
  checks: { pluginTimings: false },
  // CommonJS keeps the shape tsc gave it: a default export is `exports.default` beside the
  // named ones (`require('@tollgate/fastify').default`), so say so instead of warning.
  outputOptions: { exports: 'named' },
});

export default defineConfig(packageConfig(process.cwd()));
