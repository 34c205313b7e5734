// llms.txt, the map of the project for AI coding assistants (the llms.txt convention: an H1,
// a one-paragraph summary in a blockquote, then sections of links). It must stay whole as
// pages and packages come and go: every docs page linked, every package named with a link
// to its README (a package still marked "planned" once it has landed fails), every link
// resolving.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { links, markdownFiles, problems } from './markdown.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const file = join(root, 'llms.txt');
const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
const targets = new Set(links(text).map((l) => l.target.replace(/#.*$/, '')));

const packages = readdirSync(join(root, 'packages'))
  .filter((d) => existsSync(join(root, 'packages', d, 'package.json')))
  .map((d) => ({ dir: d, manifest: JSON.parse(readFileSync(join(root, 'packages', d, 'package.json'), 'utf8')) }))
  .filter((p) => !p.manifest.private);

describe('llms.txt', () => {
  it('is at the root: a title, a summary in a blockquote, sections of links', () => {
    expect(existsSync(file)).toBe(true);
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^# tollgate$/);
    expect(lines.find((l) => l.trim() !== '' && !l.startsWith('# '))).toMatch(/^> /);
    expect(lines.filter((l) => l.startsWith('## ')).length).toBeGreaterThanOrEqual(3);
  });

  it('links every docs page (docs/api, which is generated, aside)', () => {
    const pages = markdownFiles(join(root, 'docs')).map((f) => relative(root, f));
    expect(pages.length).toBeGreaterThan(10);
    expect(pages.filter((p) => !targets.has(p))).toEqual([]);
  });

  it('names every package with a link to its README, and calls none planned that has landed', () => {
    for (const p of packages) {
      expect(text, p.manifest.name).toContain(`[${p.manifest.name}](packages/${p.dir}/README.md)`);
      expect(text, `${p.manifest.name} is in packages/`).not.toContain(`${p.manifest.name} (planned)`);
    }
  });

  it('has no link that does not resolve', () => {
    expect(targets.size).toBeGreaterThan(20);
    expect(problems(file, root)).toEqual([]);
  });
});
