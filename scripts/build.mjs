#!/usr/bin/env node
/**
 * Builds every package in packages/* (tsdown.config.mjs: ESM, CJS and declarations in one
 * pass), skipping those whose inputs have not changed since their last build.
 *
 *   node scripts/build.mjs            build what changed (what `pnpm build` and `pnpm start` run)
 *   node scripts/build.mjs --force    rebuild everything
 *   node scripts/build.mjs --js       JavaScript only, no declarations (what `pnpm start` and
 *                                     `pnpm demo:burst` run: the declarations are most of the
 *                                     build's time and running an app needs none)
 *   node scripts/build.mjs <dir>...   only the packages in those folders and the workspace
 *                                     packages they depend on (each package's `prepack` runs
 *                                     `node ../../scripts/build.mjs .`, so `pnpm pack` and
 *                                     `pnpm publish` never ship a package without its
 *                                     declarations, even after a JavaScript-only build)
 *
 * A package is up to date when its outputs (four per entry) exist and the hash of its inputs (every
 * file under src/, its package.json and tsconfig.build.json, the shared tsconfig.base.json,
 * tsdown.config.mjs, the installed tsdown and TypeScript versions, and the hashes of the
 * workspace packages it depends on) equals the one recorded at its last successful build,
 * in <package>/node_modules/.cache/tollgate-build.json. A package starts once the packages
 * it depends on are built (its declarations are checked against theirs); independent
 * packages build side by side, one child process per core. Two builds in one checkout (two
 * packs at once) take turns: the second waits for the first, then finds its packages fresh.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

// Child mode: build one package in this process.
if (process.argv[2] === '--package') {
  const dir = process.argv[3];
  const jsOnly = process.argv[4] === '--js';
  const { build } = await import('tsdown');
  const { packageConfig } = await import(pathToFileURL(join(root, 'tsdown.config.mjs')).href);
  // A JavaScript-only build leaves the declarations of an earlier build where they are (its
  // stamp says they are stale, so the next full build redoes them).
  const only = jsOnly ? { dts: false, clean: false } : {};
  await build({ ...packageConfig(dir), ...only, config: false, logLevel: 'warn' });
  process.exit(0);
}

const force = process.argv.includes('--force');
const jsOnly = process.argv.includes('--js');
const only = process.argv
  .slice(2)
  .filter((a) => !a.startsWith('--'))
  .map((dir) => resolve(dir));
const { packageEntries } = await import(pathToFileURL(join(root, 'tsdown.config.mjs')).href);
/** What a build of the package writes for each entry (dist/index.*, dist/<subpath>/index.*). */
const outputs = (p) =>
  Object.keys(packageEntries(p.dir)).flatMap((e) =>
    (jsOnly ? ['mjs', 'cjs'] : ['mjs', 'cjs', 'd.mts', 'd.cts']).map((ext) => `dist/${e}.${ext}`),
  );
const require = createRequire(import.meta.url);
const toolVersions = ['tsdown', 'typescript'].map((name) => `${name}@${require(`${name}/package.json`).version}`);
const shared = ['tsconfig.base.json', 'tsdown.config.mjs'].map((f) => readFileSync(join(root, f)));

function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out.sort();
}

/** The workspace packages with a build script, by name. */
function workspacePackages() {
  const found = new Map();
  const base = join(root, 'packages');
  for (const name of readdirSync(base).sort()) {
    const dir = join(base, name);
    const file = join(dir, 'package.json');
    if (!existsSync(file) || !existsSync(join(dir, 'src/index.ts'))) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    if (!pkg.scripts?.build) continue;
    found.set(pkg.name, { name: pkg.name, dir, pkg });
  }
  for (const p of found.values()) {
    const all = { ...p.pkg.dependencies, ...p.pkg.peerDependencies, ...p.pkg.devDependencies };
    p.deps = Object.keys(all).filter((d) => found.has(d) && d !== p.name);
  }
  return found;
}

/** The packages of `all` whose folder is in `dirs`, with the workspace packages they depend on. */
function selected(all, dirs) {
  if (dirs.length === 0) return all;
  const named = [...all.values()].filter((p) => dirs.includes(resolve(p.dir)));
  const missing = dirs.filter((d) => !named.some((p) => resolve(p.dir) === d));
  if (missing.length) {
    console.error(`not a package with a build script: ${missing.map((d) => relative(root, d) || '.').join(', ')}`);
    process.exit(1);
  }
  const out = new Map();
  const add = (p) => {
    if (out.has(p.name)) return;
    out.set(p.name, p);
    for (const d of p.deps) add(all.get(d));
  };
  for (const p of named) add(p);
  return out;
}

const packages = selected(workspacePackages(), only);
const hashes = new Map();

function inputHash(p) {
  const known = hashes.get(p.name);
  if (known) return known;
  const h = createHash('sha256');
  for (const t of toolVersions) h.update(`${t}\0`);
  for (const s of shared) h.update(s);
  for (const f of [join(p.dir, 'package.json'), join(p.dir, 'tsconfig.build.json'), ...filesUnder(join(p.dir, 'src'))]) {
    if (!existsSync(f)) continue;
    h.update(`${relative(p.dir, f)}\0`);
    h.update(readFileSync(f));
  }
  for (const d of p.deps) h.update(`${d}\0${inputHash(packages.get(d))}`);
  const digest = h.digest('hex');
  hashes.set(p.name, digest);
  return digest;
}

const stampFile = (p) => join(p.dir, 'node_modules/.cache/tollgate-build.json');

function upToDate(p) {
  if (force || outputs(p).some((f) => !existsSync(join(p.dir, f)))) return false;
  try {
    const stamp = JSON.parse(readFileSync(stampFile(p), 'utf8'));
    return stamp.hash === inputHash(p) && (jsOnly || stamp.types === true);
  } catch {
    return false;
  }
}

function buildOne(p) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--package', p.dir, ...(jsOnly ? ['--js'] : [])], {
      cwd: p.dir,
      stdio: 'inherit',
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code !== 0) return reject(new Error(`${p.name}: build failed (${signal ?? `exit ${code}`})`));
      for (const f of outputs(p)) if (!statSync(join(p.dir, f)).isFile()) return reject(new Error(`${p.name}: ${f} missing`));
      mkdirSync(join(p.dir, 'node_modules/.cache'), { recursive: true });
      writeFileSync(stampFile(p), `${JSON.stringify({ hash: inputHash(p), types: !jsOnly })}\n`);
      console.log(`built ${p.name} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      resolve();
    });
  });
}

/**
 * Waits for any other build of this checkout to end, then holds the lock until this process
 * exits. A lock whose process is gone (killed mid-build) is taken over.
 */
async function takeLock() {
  const dir = join(root, 'node_modules/.cache');
  const file = join(dir, 'tollgate-build.lock');
  mkdirSync(dir, { recursive: true });
  // The lock is written whole under another name and linked into place, so that a reader
  // never sees it without its process id.
  const mine = `${file}.${process.pid}`;
  writeFileSync(mine, String(process.pid));
  try {
    for (;;) {
      try {
        linkSync(mine, file);
        process.on('exit', () => unlinkSync(file));
        return;
      } catch (err) {
        if (err.code !== 'EEXIST') throw err;
      }
      if (!alive(Number(readFileSync(file, 'utf8')))) {
        rmSync(file, { force: true });
        continue;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    unlinkSync(mine);
  }
}

function alive(pid) {
  try {
    return process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
}

await takeLock();
const started = Date.now();
const pending = new Map([...packages].filter(([, p]) => !upToDate(p)));
const done = new Set([...packages.keys()].filter((n) => !pending.has(n)));
const skipped = done.size;
const running = new Set();
const slots = Math.max(1, availableParallelism());

await new Promise((resolve, reject) => {
  const next = () => {
    if (pending.size === 0 && running.size === 0) return resolve();
    for (const [name, p] of pending) {
      if (running.size >= slots) break;
      if (!p.deps.every((d) => done.has(d))) continue;
      pending.delete(name);
      running.add(name);
      buildOne(p).then(() => {
        running.delete(name);
        done.add(name);
        next();
      }, reject);
    }
    if (running.size === 0 && pending.size > 0) reject(new Error(`dependency cycle among ${[...pending.keys()]}`));
  };
  next();
}).catch((err) => {
  console.error(err.message);
  process.exit(1);
});

const rebuilt = packages.size - skipped;
console.log(`${rebuilt} built, ${skipped} up to date (${((Date.now() - started) / 1000).toFixed(1)} s)`);
