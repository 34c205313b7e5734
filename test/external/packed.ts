/**
 * What a user gets: every package in packages/* packed with `pnpm pack` and installed with
 * npm into a fresh project outside the workspace (no workspace links; npm reaches the
 * registry for the third-party packages and caches in ~/.npm). Shared by the consumer
 * matrix (consumer.test.ts) and the docs' code blocks (test/docs/code-blocks.test.ts), so
 * both check the same tarballs the same way. A package that lands in packages/ later
 * joins by itself.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const exec = promisify(execFile);
export const root = fileURLToPath(new URL('../..', import.meta.url));

export interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  bin?: Record<string, string> | string;
  exports?: unknown;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  devDependencies?: Record<string, string>;
}

export interface Pkg {
  name: string;
  short: string;
  dir: string;
  manifest: Manifest;
}

/** The published packages of packages/*, sorted by folder. */
export const packages: Pkg[] = readdirSync(join(root, 'packages'))
  .sort()
  .filter((short) => existsSync(join(root, 'packages', short, 'package.json')))
  .map((short) => {
    const dir = join(root, 'packages', short);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
    return { name: manifest.name, short, dir, manifest };
  })
  .filter((p) => !p.manifest.private);

export const names = packages.map((p) => p.name);

/** What a user can import: every package and each subpath its exports map declares. */
export const specifiers = packages.flatMap((p) =>
  Object.keys((p.manifest.exports as Record<string, unknown> | undefined) ?? { '.': null })
    .filter((k) => k !== './package.json')
    .map((k) => (k === '.' ? p.name : `${p.name}/${k.slice(2)}`)),
);

/** Runs a command; its stdout, or an error holding everything it printed. */
export async function run(cmd: string, args: string[], cwd: string, timeout = 120_000, env: NodeJS.ProcessEnv = {}): Promise<string> {
  try {
    const { stdout } = await exec(cmd, args, { cwd, timeout, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1', ...env } });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}:\n${e.stdout ?? ''}${e.stderr ?? ''}\n${e.message}`);
  }
}

/**
 * The compiler options of a strict TypeScript user, for one `module` setting: `strict`,
 * `skipLibCheck: false` (our declarations are checked too), Node's types and the DOM lib, no emit,
 * and the one `paths` entry a project with both Koa's and Express 5.3's types needs.
 */
export function strictCompilerOptions(module: 'node16' | 'nodenext' | 'preserve'): Record<string, unknown> {
  return {
    module,
    moduleResolution: module === 'preserve' ? 'bundler' : module,
    target: 'ES2022',
    // DOM: Hono's declarations name Web types @types/node lacks (CloseEvent); a Hono user adds it.
    lib: ['ES2022', 'DOM'],
    types: ['node'],
    strict: true,
    skipLibCheck: false,
    noEmit: true,
    // Express 5.3 brings content-disposition 2, which ships its own types; hoisted, it
    // shadows @types/content-disposition, which @types/koa is written against (docs/koa.md).
    paths: { 'content-disposition': ['./node_modules/@types/content-disposition'] },
  };
}

/** Fails unless every package has been built (`pnpm build`; the test command runs it). */
export function assertBuilt(): void {
  for (const p of packages) {
    for (const f of ['dist/index.mjs', 'dist/index.d.mts']) {
      if (!existsSync(join(p.dir, f))) throw new Error(`${p.name} is not built (${f} missing): run \`pnpm build\` first`);
    }
  }
}

/** Packs every package into `dest`; the tarballs by package name. */
export async function packAll(dest: string): Promise<Map<string, string>> {
  // One pnpm for every package: workspace:* ranges become the packages' versions.
  await run('pnpm', ['-r', '--filter', './packages/*', 'pack', '--pack-destination', dest], root, 240_000);
  const tarballs = new Map<string, string>();
  for (const p of packages) {
    const file = join(dest, `${p.name.replace(/^@/, '').replace('/', '-')}-${p.manifest.version}.tgz`);
    if (existsSync(file)) tarballs.set(p.name, file);
  }
  return tarballs;
}

/**
 * Writes a package.json in `dir` that depends on every tarball and on `dependencies`, and
 * runs `npm install` there. The tarballs' dependencies on each other are pinned to the
 * tarballs with npm `overrides`, so nothing of ours comes from the registry.
 */
export async function installTarballs(dir: string, tarballs: Map<string, string>, dependencies: Record<string, string>): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const tollgate = Object.fromEntries([...tarballs].map(([n, f]) => [n, `file:${f}`]));
  const manifest = {
    name: 'tollgate-consumer',
    private: true,
    dependencies: { ...tollgate, ...dependencies },
    overrides: Object.fromEntries(names.filter((n) => tarballs.has(n)).map((n) => [n, `$${n}`])),
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], dir, 240_000);
}

/**
 * The version range the workspace itself uses for a third-party package: from the root's
 * and every workspace package's dependencies, peers and devDependencies (the first found,
 * root first), so the docs are checked against what the project is tested with.
 */
export function workspaceRange(name: string): string | undefined {
  const manifests = [join(root, 'package.json'), ...['packages', 'examples'].flatMap((d) => manifestsUnder(join(root, d)))];
  for (const file of manifests) {
    const m = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
    const range = m.devDependencies?.[name] ?? m.dependencies?.[name] ?? m.peerDependencies?.[name];
    if (range !== undefined && !range.startsWith('workspace:')) return range;
  }
  return undefined;
}

function manifestsUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .sort()
    .map((d) => join(dir, d, 'package.json'))
    .filter((f) => existsSync(f));
}
