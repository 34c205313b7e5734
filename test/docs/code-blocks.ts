// The fenced code blocks of the user-facing markdown (README.md, docs/ outside the generated
// docs/api, every package's and example's README), with their language and the line they
// start on, so that a test can compile or parse each one and point at it as `file:line`.
import { existsSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, relative } from 'node:path';
import { markdownFiles } from './markdown.js';

export interface CodeBlock {
  /** The markdown file, relative to the repository root. */
  file: string;
  /** The 1-based line of the block's first code line (the one after the opening fence). */
  line: number;
  /** The language of the info string, lower-cased (`ts`, `js`, `sh`...); '' when none. */
  lang: string;
  /** The words after the language (`fragment` marks a deliberate partial). */
  flags: string[];
  code: string;
}

export type BlockKind = 'ts' | 'js' | 'fragment' | 'other';

const TS = new Set(['ts', 'typescript', 'mts', 'cts']);
const JS = new Set(['js', 'javascript', 'mjs', 'cjs']);

/** What the docs test does with a block: compile it (ts), parse it (js), count it as a skipped fragment, or leave it. */
export function kindOf(b: Pick<CodeBlock, 'lang' | 'flags'>): BlockKind {
  if (!TS.has(b.lang) && !JS.has(b.lang)) return 'other';
  if (b.flags.includes('fragment')) return 'fragment';
  return TS.has(b.lang) ? 'ts' : 'js';
}

/** The fenced blocks of one markdown text (backtick or tilde fences, as CommonMark reads them). */
export function codeBlocks(text: string, file = ''): CodeBlock[] {
  const out: CodeBlock[] = [];
  const lines = text.split('\n');
  let open: { fence: string; indent: number; block: CodeBlock; body: string[] } | undefined;
  lines.forEach((line, i) => {
    const m = /^( {0,3})(`{3,}|~{3,})(.*)$/.exec(line);
    if (open) {
      if (m?.[2] && m[2][0] === open.fence[0] && m[2].length >= open.fence.length && (m[3] ?? '').trim() === '') {
        open.block.code = open.body.join('\n');
        out.push(open.block);
        open = undefined;
      } else {
        // Content lines lose up to the fence's own indentation, as CommonMark says.
        open.body.push(line.replace(new RegExp(`^ {0,${open.indent}}`), ''));
      }
      return;
    }
    if (!m?.[2]) return;
    const info = (m[3] ?? '').trim();
    if (m[2][0] === '`' && info.includes('`')) return; // not a fence: an inline code span
    const [lang = '', ...flags] = info.split(/\s+/).filter(Boolean);
    open = { fence: m[2], indent: (m[1] ?? '').length, body: [], block: { file, line: i + 2, lang: lang.toLowerCase(), flags, code: '' } };
  });
  return out;
}

/**
 * The markdown a user reads: README.md, docs/** (not the generated docs/api), and the README
 * of every package and every example, found anew on each run so that a new package or
 * example is covered without editing the test.
 */
export function userDocs(root: string): string[] {
  const files = [join(root, 'README.md'), ...markdownFiles(join(root, 'docs'))];
  for (const dir of ['packages', 'examples']) {
    const base = join(root, dir);
    if (!existsSync(base)) continue;
    files.push(...markdownFiles(base).filter((f) => f.endsWith('/README.md')));
  }
  return files.filter((f) => existsSync(f)).map((f) => relative(root, f));
}

/** Every fenced block of the user-facing markdown. */
export function userDocBlocks(root: string): CodeBlock[] {
  return userDocs(root).flatMap((file) => codeBlocks(readFileSync(join(root, file), 'utf8'), file));
}

/** The package names a TypeScript or JavaScript text imports (`import`, `export ... from`, `require`, `import()`), built-ins excluded. */
export function importedPackages(code: string): string[] {
  const out = new Set<string>();
  const specifiers = code.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]([^'"]+)['"]/g);
  for (const [, spec = ''] of specifiers) {
    if (spec.startsWith('.') || spec.startsWith('node:') || spec.startsWith('/')) continue;
    const parts = spec.split('/');
    const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? '');
    if (!isBuiltin(name)) out.add(name);
  }
  return [...out].sort();
}
