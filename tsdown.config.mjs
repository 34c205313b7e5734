// One build for every package in packages/*: ESM, CommonJS and declarations from
// src/index.ts in one pass (tsdown on rolldown; the declarations come from the
// TypeScript compiler, so they are what tsc would emit, bundled into one file per format).
// Dependencies and peers stay external. `node scripts/build.mjs` runs this for each
// package that changed, in dependency order; `pnpm --filter <pkg> build` for one.
import { defineConfig } from 'tsdown';

/** The options shared by every package; `cwd` is the package's folder. */
export const packageConfig = (cwd) => ({
  cwd,
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  platform: 'node',
  target: 'node20',
  tsconfig: 'tsconfig.build.json',
  outDir: 'dist',
  // dist/index.mjs + index.d.mts for import, dist/index.cjs + index.d.cts for require.
  fixedExtension: true,
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
