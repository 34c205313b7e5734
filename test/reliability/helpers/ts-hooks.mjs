// Module hooks for the reliability suite's child processes (registered by ts-loader.mjs):
// `@tollgate/<name>` resolves to packages/<name>/src/index.ts, as vitest.config.ts aliases
// it, and TypeScript files are transpiled on load with the installed `typescript`, so a
// child runs the same sources as the tests without a build. Output is cached on disk by a
// hash of the source, so that the many children of a run transpile each file once.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = new URL('../../../', import.meta.url);
const cacheDir = join(tmpdir(), 'tollgate-ts-cache');
mkdirSync(cacheDir, { recursive: true });
let ts;
/** Part of every cache key: change it when the transpile options below change. */
const OPTIONS_ID = 'esnext-es2022-inline-map-1';

export async function resolve(specifier, context, next) {
  const m = /^@tollgate\/([a-z-]+)$/.exec(specifier);
  if (m) return { url: new URL(`packages/${m[1]}/src/index.ts`, root).href, shortCircuit: true };
  // Sources import their siblings as `./x.js`; the file on disk is `./x.ts`.
  if (context.parentURL?.endsWith('.ts') && specifier.startsWith('.') && specifier.endsWith('.js')) {
    const sibling = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL);
    if (existsSync(fileURLToPath(sibling))) return { url: sibling.href, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  const source = readFileSync(fileURLToPath(url), 'utf8');
  const cached = join(
    cacheDir,
    `${createHash('sha1').update(OPTIONS_ID).update('\0').update(url).update('\0').update(source).digest('hex')}.js`,
  );
  if (existsSync(cached)) return { format: 'module', source: readFileSync(cached, 'utf8'), shortCircuit: true };
  ts ??= (await import('typescript')).default;
  const out = ts.transpileModule(source, {
    fileName: fileURLToPath(url),
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, inlineSourceMap: true },
  });
  // Written under a temporary name first: a concurrent child never reads half a file.
  const tmp = `${cached}.${process.pid}.tmp`;
  writeFileSync(tmp, out.outputText);
  renameSync(tmp, cached);
  return { format: 'module', source: out.outputText, shortCircuit: true };
}
