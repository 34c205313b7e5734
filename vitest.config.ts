import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const pkg = (name: string) => fileURLToPath(new URL(`./packages/${name}/src/index.ts`, import.meta.url));

// The subpaths ('@tollgate/core/http', '/essentials') first: an alias also matches the start of a longer specifier.
const alias = {
  '@tollgate/core/http': fileURLToPath(new URL('./packages/core/src/http/index.ts', import.meta.url)),
  '@tollgate/core/essentials': fileURLToPath(new URL('./packages/core/src/essentials/index.ts', import.meta.url)),
  '@tollgate/core/node': fileURLToPath(new URL('./packages/core/src/node/index.ts', import.meta.url)),
  '@tollgate/core': pkg('core'),
  '@tollgate/redis': pkg('redis'),
  '@tollgate/express': pkg('express'),
  '@tollgate/fastify': pkg('fastify'),
  '@tollgate/nestjs': pkg('nestjs'),
  '@tollgate/node': pkg('node'),
  '@tollgate/hono': pkg('hono'),
  '@tollgate/koa': pkg('koa'),
  '@tollgate/client': pkg('client'),
  '@tollgate/cli': pkg('cli'),
  '@tollgate/otel': pkg('otel'),
};

const shared = {
  globalSetup: ['test/setup/global.ts'],
  testTimeout: 20_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
};

// Tests run against the TypeScript sources; test/external checks the built packages.
// Two groups: everything else in parallel first, then the fault, load and flood suites of
// test/reliability one file at a time, so that their timing bounds (p99 within timeoutMs,
// exactness across four app processes) measure tollgate, not a machine shared with the
// rest of the suite.
export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      {
        resolve: { alias },
        test: {
          ...shared,
          name: 'unit',
          include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: ['**/node_modules/**', 'test/bench/**', 'test/reliability/**'],
          // Vitest's default is one worker fewer than the cores, so one file at a time on 2 cores;
          // most files here wait on Redis, servers and child processes, and two overlap those waits.
          maxWorkers: Math.max(2, availableParallelism() - 1),
          sequence: { groupOrder: 0 },
        },
      },
      {
        resolve: { alias },
        test: {
          ...shared,
          name: 'reliability',
          include: ['test/reliability/**/*.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
