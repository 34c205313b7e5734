/**
 * Docs whose examples work. Every fenced `ts` block of README.md, docs/ (not the generated
 * docs/api), the packages' READMEs and the examples' READMEs compiles as written, each as a
 * module of its own, under strict TypeScript (`module: nodenext`, `skipLibCheck: false`)
 * against the packed packages installed as a user installs them (test/external/packed.ts);
 * every `js` block parses as Node loads it. A block marked ```` ```ts fragment ```` is a
 * deliberate partial: skipped, and counted.
 *
 * All the `ts` blocks are one tsc program, so the check takes seconds: the blocks' own
 * names cannot meet (each file is a module), but a module augmentation shown on one page
 * (Express' `req.user` in docs/express.md) is seen by every block, as it would be in an
 * application that has it. The third-party packages the blocks import are installed at
 * the version range the workspace uses, with their `@types/` package when the workspace
 * has one, so a new package or page is covered without editing this test.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, installTarballs, names, packAll, packages, root, strictCompilerOptions, workspaceRange } from '../external/packed.js';
import { type CodeBlock, codeBlocks, importedPackages, kindOf, userDocBlocks, userDocs } from './code-blocks.js';

const exec = promisify(execFile);
const here = fileURLToPath(new URL('.', import.meta.url));

const blocks = userDocBlocks(root);
const tsBlocks = blocks.filter((b) => kindOf(b) === 'ts');
const jsBlocks = blocks.filter((b) => kindOf(b) === 'js');
const fragments = blocks.filter((b) => kindOf(b) === 'fragment');

/** Blocks that must fail, compiled and parsed with the docs so that the check is seen to catch what it should. */
const canaries = {
  ts: {
    file: 'canary.md',
    line: 10,
    lang: 'ts',
    flags: [],
    code: "import { createLimiter } from '@tollgate/core';\n\nawait limiter.consume(req);\ncreateLimiter({ rules: [] });",
  },
  js: [
    { file: 'canary.md', line: 20, lang: 'js', flags: [], code: 'const n: number = 1;' },
    { file: 'canary.md', line: 30, lang: 'js', flags: [], code: 'if (true) return;' },
  ],
} satisfies { ts: CodeBlock; js: CodeBlock[] };

let work: string;
let app: string;
let tsProblems: string[] = [];
let jsProblems: string[] = [];

/** The third-party packages to install: what the `ts` blocks import and what our packages ask as peers, each with its types. */
function dependencies(): Record<string, string> {
  const wanted = new Set<string>(['@types/node']);
  for (const b of tsBlocks) for (const name of importedPackages(b.code)) if (!names.includes(name)) wanted.add(name);
  for (const p of packages) {
    const optional = p.manifest.peerDependenciesMeta ?? {};
    for (const peer of Object.keys(p.manifest.peerDependencies ?? {})) if (!optional[peer]?.optional) wanted.add(peer);
  }
  const out: Record<string, string> = {};
  for (const name of wanted) {
    const range = workspaceRange(name);
    if (range === undefined) throw new Error(`the docs import ${name}, which no workspace package.json names: add it where it is used`);
    out[name] = range;
    const types = `@types/${name.replace(/^@/, '').replace('/', '__')}`;
    const typesRange = name.startsWith('@types/') ? undefined : workspaceRange(types);
    if (typesRange !== undefined) out[types] = typesRange;
  }
  return out;
}

/**
 * Every diagnostic of one program over `files` (paths relative to `dir`): syntax and types
 * of every file, declarations included, each as `file:line: TSnnnn message` with a block's
 * file and line the markdown's. (tsc itself stops at syntax errors; the API does not have to.)
 */
function compile(dir: string, files: Map<string, CodeBlock>, options: Record<string, unknown>): string[] {
  const parsed = ts.convertCompilerOptionsFromJson(options, dir);
  if (parsed.errors.length) throw new Error(ts.formatDiagnostics(parsed.errors, host(dir)));
  // As a tsconfig.json in `dir` would: `paths` are relative to it.
  if (parsed.options.paths) parsed.options.pathsBasePath = dir;
  const program = ts.createProgram(
    [...files.keys()].map((f) => join(dir, f)),
    parsed.options,
  );
  const all = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...program.getSyntacticDiagnostics(),
    ...program.getSemanticDiagnostics(),
  ];
  return all.map((d) => {
    const message = `TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    if (!d.file || d.start === undefined) return message;
    const row = d.file.getLineAndCharacterOfPosition(d.start).line;
    const name = relative(dir, d.file.fileName);
    const block = files.get(name);
    return block ? `${block.file}:${block.line + row}: ${message}` : `${name}:${row + 1}: ${message}`;
  });
}

function host(dir: string): ts.FormatDiagnosticsHost {
  return { getCanonicalFileName: (f) => f, getCurrentDirectory: () => dir, getNewLine: () => '\n' };
}

beforeAll(async () => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), 'tollgate-docs-'));
  app = join(work, 'app');
  await installTarballs(app, await packAll(join(work, 'tarballs')), dependencies());

  mkdirSync(join(app, 'blocks'));
  const tsFiles = new Map<string, CodeBlock>();
  for (const [i, b] of [...tsBlocks, canaries.ts].entries()) tsFiles.set(`blocks/${i}.mts`, b);
  for (const [f, b] of tsFiles) writeFileSync(join(app, f), `${b.code}\n`);
  // Each block a module of its own, even one without an import.
  tsProblems = compile(app, tsFiles, { ...strictCompilerOptions('nodenext'), moduleDetection: 'force' });

  const jsFiles = new Map<string, CodeBlock>();
  for (const [i, b] of [...jsBlocks, ...canaries.js].entries())
    jsFiles.set(join(app, 'blocks', `${i}.${b.lang === 'cjs' ? 'cjs' : 'mjs'}`), b);
  for (const [f, b] of jsFiles) writeFileSync(f, `${b.code}\n`);
  const { stdout } = await exec(
    process.execPath,
    ['--experimental-vm-modules', '--no-warnings', join(here, 'parse-js.mjs'), ...jsFiles.keys()],
    {
      cwd: app,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const failures = JSON.parse(stdout) as { file: string; line: number; message: string }[];
  jsProblems = failures.map(({ file, line, message }) => {
    const b = jsFiles.get(file);
    return b ? `${b.file}:${b.line + line - 1}: ${message}` : `${relative(app, file)}:${line}: ${message}`;
  });
}, 400_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const notCanary = (p: string) => !p.startsWith('canary.md:');

describe('the code blocks of the docs', () => {
  it(`every ts block compiles under strict TypeScript against the packed packages (${tsBlocks.length} blocks)`, () => {
    expect(tsBlocks.length).toBeGreaterThan(0);
    expect(tsProblems.filter(notCanary)).toEqual([]);
  });

  it(`every js block parses as an ES module (${jsBlocks.length} blocks)`, () => {
    expect(jsBlocks.length).toBeGreaterThan(0);
    expect(jsProblems.filter(notCanary)).toEqual([]);
  });

  it(`skips the blocks marked fragment (${fragments.length}), and only those`, () => {
    for (const b of fragments) expect(['ts', 'typescript', 'js', 'javascript', 'mjs'], `${b.file}:${b.line}`).toContain(b.lang);
    expect(tsBlocks.length + jsBlocks.length + fragments.length).toBe(blocks.filter((b) => kindOf(b) !== 'other').length);
    console.log(`docs code blocks: ${tsBlocks.length} compiled, ${jsBlocks.length} parsed, ${fragments.length} fragments skipped`);
  });

  it('the check catches a name a block never defines, TypeScript in a js block and a top-level return', () => {
    expect(tsProblems.filter((p) => !notCanary(p))).toEqual([
      "canary.md:12: TS2304 Cannot find name 'limiter'.",
      "canary.md:12: TS2304 Cannot find name 'req'.",
    ]);
    expect(jsProblems.filter((p) => !notCanary(p))).toEqual([
      'canary.md:20: Missing initializer in const declaration',
      'canary.md:30: Illegal return statement',
    ]);
  });
});

describe('the reader of the docs', () => {
  it('covers the README, docs/ without docs/api, and every package and example README', () => {
    const files = userDocs(root);
    expect(files).toContain('README.md');
    expect(files).toContain('docs/reference/core.md');
    expect(files.some((f) => f.startsWith('docs/api/'))).toBe(false);
    for (const p of packages) expect(files).toContain(`packages/${p.short}/README.md`);
    expect(files).toContain('examples/playground/README.md');
  });

  it('reads fences as CommonMark does: info strings, tildes, longer fences, indentation', () => {
    const text = [
      '# T',
      '```ts fragment',
      'a;',
      '```',
      '~~~js',
      '```',
      '~~~',
      '  ````typescript',
      '  b;',
      '  ```',
      '  ````',
      '```sh',
      'c',
      '```',
    ].join('\n');
    expect(codeBlocks(text, 'x.md').map(({ line, lang, flags, code }) => ({ line, lang, flags, code }))).toEqual([
      { line: 3, lang: 'ts', flags: ['fragment'], code: 'a;' },
      { line: 6, lang: 'js', flags: [], code: '```' },
      { line: 9, lang: 'typescript', flags: [], code: 'b;\n```' },
      { line: 13, lang: 'sh', flags: [], code: 'c' },
    ]);
    expect(codeBlocks(text).map(kindOf)).toEqual(['fragment', 'js', 'ts', 'other']);
  });

  it('names the packages a block imports, not built-ins or relative files', () => {
    const code =
      "import a from 'express';\nimport { b } from '@scope/pkg/sub';\nimport http from 'node:http';\nimport fs from 'fs';\nconst c = await import('./x.js');\nconst d = require('ioredis');";
    expect(importedPackages(code)).toEqual(['@scope/pkg', 'express', 'ioredis']);
  });
});
