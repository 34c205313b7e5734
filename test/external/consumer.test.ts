/**
 * The consumer matrix: every package in packages/* packed with `pnpm pack` and installed
 * with npm into a fresh project outside the workspace (no workspace links; npm reaches the
 * registry for express, fastify, koa, NestJS, ioredis and TypeScript, and caches in ~/.npm),
 * then used there as a user would:
 * - each tarball holds exactly what a user needs (dist, README, LICENSE, CHANGELOG) and
 *   its package.json passes publint;
 * - each package is imported from ESM and required from CommonJS;
 * - a small program using every package's main API type-checks with `strict` and
 *   `skipLibCheck: false` under `module` node16, nodenext and preserve (bundler
 *   resolution), on the newest TypeScript 5.x and 6.x;
 * - a tiny Express, Fastify, node:http, Koa, Hono and NestJS (on both platforms) app runs
 *   against the memory store and Redis.
 * The install is done once per run and shared by every case. A package that lands later
 * joins by itself; one without a program in consumer/types is still type-checked through
 * its declarations (all.mts / all.cts import every package). Requires `pnpm build` first
 * (the test command runs it).
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import {
  assertBuilt,
  installTarballs,
  names,
  type Pkg,
  packAll,
  packages,
  root,
  run,
  specifiers,
  strictCompilerOptions,
} from './packed.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const hasNode = names.includes('@tollgate/node');
const hasHono = names.includes('@tollgate/hono');

/** What a tarball holds: its manifest, the docs a user reads, every file its exports name, and the bin shims. */
function expectedFiles(p: Pkg): string[] {
  const bin = typeof p.manifest.bin === 'string' ? [p.manifest.bin] : Object.values(p.manifest.bin ?? {});
  const named = new Set<string>();
  const walk = (v: unknown): void => {
    if (typeof v === 'string') named.add(v.replace(/^\.\//, ''));
    else if (v && typeof v === 'object') for (const x of Object.values(v)) walk(x);
  };
  walk(p.manifest.exports);
  return [...new Set(['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', ...named, ...bin.map((b) => b.replace(/^\.\//, ''))])].sort();
}

/** Beyond those, only the chunks the entries share (built JavaScript and declarations in dist/). */
const isChunk = (f: string) => /^dist\/[\w.-]+\.(mjs|cjs|d\.mts|d\.cts)$/.test(f);

let work: string;
let app: string;
let redis: RedisServer;
let tarballs = new Map<string, string>();

// The type-check cells run side by side, but no more at once than there are cores: each is
// a whole tsc over @types/node, express, fastify and ioredis, and starved of CPU it would
// meet its deadline while waiting.
const CORES = Math.max(1, availableParallelism());
let free = CORES;
const waiting: (() => void)[] = [];
async function oneCore<T>(task: () => Promise<T>): Promise<T> {
  if (free > 0) free--;
  else await new Promise<void>((resolve) => waiting.push(resolve));
  try {
    return await task();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else free++;
  }
}

/** Caps for a hang only: a cell that finishes sooner takes only its own time. */
const TSC_CAP_MS = 240_000;
const APP_CAP_MS = 60_000;
/** A cell's deadline when `count` cells share the cores through {@link oneCore}, each capped at `capMs`. */
const queuedTimeout = (count: number, capMs: number) => Math.ceil(count / CORES) * capMs + 30_000;

/** The tsconfig of one cell of the type-check matrix. */
function tsconfig(module: 'node16' | 'nodenext' | 'preserve'): object {
  const files = [...packages.map((p) => `types/${p.short}.mts`).filter((f) => existsSync(join(app, f))), 'types/all.mts', 'types/all.cts'];
  return { compilerOptions: strictCompilerOptions(module), files };
}

beforeAll(async () => {
  assertBuilt();
  const redisStarted = startRedis();
  work = mkdtempSync(join(tmpdir(), 'tollgate-consumer-'));
  tarballs = await packAll(join(work, 'tarballs'));
  app = join(work, 'app');
  cpSync(join(here, 'consumer'), app, { recursive: true });
  writeFileSync(join(app, 'packages.json'), JSON.stringify(specifiers));
  writeFileSync(join(app, 'types/all.mts'), specifiers.map((n, i) => `import * as p${i} from '${n}';\nexport { p${i} };\n`).join(''));
  writeFileSync(join(app, 'types/all.cts'), specifiers.map((n, i) => `import p${i} = require('${n}');\nexport { p${i} };\n`).join(''));
  await installTarballs(app, tarballs, {
    express: '^5.1.0',
    fastify: '^5.4.0',
    hono: '^4.13.0',
    '@hono/node-server': '^2.1.0',
    ioredis: '^5.6.0',
    '@opentelemetry/api': '^1.9.0',
    '@nestjs/common': '^12.0.0',
    '@nestjs/core': '^12.0.0',
    '@nestjs/platform-express': '^12.0.0',
    '@nestjs/platform-fastify': '^12.0.0',
    'reflect-metadata': '^0.2.0',
    rxjs: '^7.8.0',
    '@types/express': '^5.0.0',
    koa: '^3.0.0',
    '@koa/router': '^15.0.0',
    '@types/koa': '^3.0.0',
    '@types/node': '^20.19.0',
    typescript5: 'npm:typescript@^5.9.0',
    typescript6: 'npm:typescript@^6.0.0',
  });
  redis = await redisStarted;
}, 300_000);

afterAll(async () => {
  await redis?.destroy();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('tarballs', () => {
  it('every package has the shared build, layout and metadata (node scripts/package-metadata.mjs --fix)', async () => {
    expect(await run(process.execPath, [join(root, 'scripts/package-metadata.mjs')], root)).toContain('as expected');
  });

  it('every package in packages/* was packed', () => {
    expect([...tarballs.keys()].sort()).toEqual([...names].sort());
  });

  it.each(packages.map((p) => [p.name, p] as const))('%s holds what a user needs and nothing else', async (_name, p) => {
    const listing = await run('tar', ['-tzf', tarballs.get(p.name) ?? ''], work);
    const files = listing
      .split('\n')
      .filter((l) => l && !l.endsWith('/'))
      .map((l) => l.replace(/^package\//, ''))
      .sort();
    const expected = expectedFiles(p);
    expect(files.filter((f) => expected.includes(f))).toEqual(expected);
    expect(files.filter((f) => !expected.includes(f) && !isChunk(f))).toEqual([]);
  });

  it.each(packages.map((p) => [p.name, p] as const))('%s passes publint', async (_name, p) => {
    const out = await run(process.execPath, [join(root, 'node_modules/publint/src/cli.js'), '--strict', tarballs.get(p.name) ?? ''], p.dir);
    expect(out).not.toMatch(/error|warning|suggestion/i);
  });
});

describe('installed from the tarballs', () => {
  it('are real copies, not workspace links', () => {
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8'));
    for (const n of names) {
      const entry = lock.packages[`node_modules/${n}`];
      expect(entry, n).toBeDefined();
      expect(entry.link, n).toBeUndefined();
      expect(entry.resolved, n).toMatch(/\.tgz$/);
    }
  });

  it('import from ESM', async () => {
    expect(await run(process.execPath, ['esm.mjs'], app)).toContain(`esm ok ${specifiers.length} true`);
  });

  it('require from CommonJS', async () => {
    expect(await run(process.execPath, ['cjs.cjs'], app)).toContain(`cjs ok ${specifiers.length} true`);
  });
});

// Regression (issue 17): under node16/nodenext with skipLibCheck: false, @tollgate/fastify's
// declarations failed with "TS2307: Cannot find module 'fastify/types/type-provider'": the
// inferred types of its plugins named a path fastify's exports map does not publish.
it('fastify declarations name no unexported fastify path (TS2307 fastify/types/type-provider)', () => {
  const fastify = packages.find((p) => p.name === '@tollgate/fastify');
  for (const f of ['dist/index.d.mts', 'dist/index.d.cts']) {
    expect(readFileSync(join(fastify?.dir ?? '', f), 'utf8')).not.toMatch(/["']fastify\/types\//);
  }
});

describe.concurrent('type-check (strict, skipLibCheck: false)', () => {
  const cells = ['typescript5', 'typescript6'].flatMap((ts) => (['node16', 'nodenext', 'preserve'] as const).map((m) => [ts, m] as const));
  // The test's own deadline covers its wait for a core: each tsc is capped at TSC_CAP_MS by run().
  it.each(cells)('%s, module %s', { timeout: queuedTimeout(cells.length, TSC_CAP_MS) }, async (ts, module) => {
    const config = `tsconfig.${ts}.${module}.json`;
    writeFileSync(join(app, config), JSON.stringify(tsconfig(module), null, 2));
    const version = JSON.parse(readFileSync(join(app, 'node_modules', ts, 'package.json'), 'utf8')).version as string;
    expect(version.split('.')[0]).toBe(ts.slice(-1));
    await oneCore(() => run(process.execPath, [join(app, 'node_modules', ts, 'bin/tsc'), '-p', config], app, TSC_CAP_MS));
  });
});

describe.concurrent('apps', () => {
  // The node:http app joins once @tollgate/node is in packages/.
  const frameworks = [
    ...(hasNode ? ['express', 'fastify', 'node-http'] : ['express', 'fastify']),
    'koa',
    ...(hasHono ? ['hono'] : []),
    'nestjs-express',
    'nestjs-fastify',
  ];
  const cells = frameworks.flatMap((f) => (['memory', 'redis'] as const).map((s) => [f, s] as const));
  if (!hasNode) it.todo('node-http on the memory and redis stores (waits for @tollgate/node in packages/)');
  // Two apps at a time, as the type-check cells: twelve Node processes started at once on a busy
  // 2-core machine took NestJS past its deadline while it was still booting.
  it.each(cells)(
    '%s on the %s store: 2 allowed, the third refused with 429',
    { timeout: queuedTimeout(cells.length, APP_CAP_MS) },
    async (framework, store) => {
      const out = await oneCore(() => run(process.execPath, ['apps/run.mjs', framework, store, String(redis.port)], app, APP_CAP_MS));
      const result = JSON.parse(out.trim().split('\n').at(-1) ?? '{}');
      expect(result.statuses).toEqual([200, 200, 429]);
      expect(Number(result.retryAfter)).toBeGreaterThan(0);
      expect(result.ratelimit).toMatch(/r=0/);
      expect(result.policy).toMatch(/q=2/);
    },
  );
});
