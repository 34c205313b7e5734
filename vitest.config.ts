import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const pkg = (name: string) => fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url));

// Tests run against the TypeScript sources; test/external checks the built packages.
export default defineConfig({
  resolve: {
    alias: {
      '@tollgate/core': pkg('core'),
      '@tollgate/redis': pkg('redis'),
      '@tollgate/express': pkg('express'),
      '@tollgate/fastify': pkg('fastify'),
      '@tollgate/client': pkg('client'),
      '@tollgate/cli': pkg('cli'),
    },
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', 'test/bench/**'],
    globalSetup: ['test/setup/global.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
