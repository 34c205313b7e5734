// Every markdown file of the repository stands on its own: each relative link reaches a
// file that exists, each `#anchor` a heading of that file as GitHub slugs it, and no page
// points to a document the repository does not hold.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { anchors, links, markdownFiles, problems, slug } from './markdown.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the repository markdown', () => {
  const files = markdownFiles(root);

  it('covers the docs, the README and every package and example README', () => {
    const rel = files.map((f) => f.slice(root.length));
    expect(rel).toContain('README.md');
    expect(rel).toContain('docs/algorithms.md');
    expect(rel).toContain('packages/otel/README.md');
    expect(rel).toContain('examples/express-basic/README.md');
    expect(rel.some((f) => f.includes('node_modules'))).toBe(false);
  });

  it('has no relative link or anchor that does not resolve, and no reference to a document outside the repository', () => {
    const cache = new Map<string, Set<string>>();
    const found = files.flatMap((f) => problems(f, root, cache));
    expect(found).toEqual([]);
  });
});

describe('the checker', () => {
  it('slugs headings as GitHub does', () => {
    expect(slug("`'draft-10'` (default)")).toBe('draft-10-default');
    expect(slug("leaky-bucket, `mode: 'queue'`: a shaper")).toBe('leaky-bucket-mode-queue-a-shaper');
    expect(slug('Per-route rules: `limiter.route({ rules })`')).toBe('per-route-rules-limiterroute-rules-');
    expect(slug('TG_INVALID_OPTION')).toBe('tg_invalid_option');
    expect(slug('Throughput and server CPU (autocannon)')).toBe('throughput-and-server-cpu-autocannon');
    expect(slug('See [the page](x.md) now')).toBe('see-the-page-now');
  });

  it('numbers repeated headings and ignores headings inside code fences', () => {
    const set = anchors('# A\n## Figures\n```sh\n# not a heading\n```\n## Figures\n<a name="here"></a>\n');
    expect([...set].sort()).toEqual(['a', 'figures', 'figures-1', 'here']);
  });

  it('reads inline links, images and reference definitions, not links in code', () => {
    const found = links('See [a](a.md#x) and ![i](img/i.svg "t").\n`[no](no.md)`\n```\n[no](no.md)\n```\n[ref]: b.md\n');
    expect(found.map((l) => l.target)).toEqual(['a.md#x', 'img/i.svg', 'b.md']);
  });

  const tmp = mkdtempSync(join(tmpdir(), 'tollgate-links-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('reports a missing file, a missing anchor and a reference to the outside contract', () => {
    mkdirSync(join(tmp, 'docs'));
    writeFileSync(join(tmp, 'docs', 'b.md'), '# B\n\n## Real heading\n');
    writeFileSync(
      join(tmp, 'docs', 'a.md'),
      [
        '# A',
        '[ok](b.md#real-heading) [ok too](#a) [web](https://example.com/x#y) [src](../src.ts#L3)',
        '[gone](missing.md) [bad anchor](b.md#nope) [self](#nowhere)',
        'As SPEC 3.5 says, and ../shared/SPEC.md too.',
      ].join('\n'),
    );
    writeFileSync(join(tmp, 'src.ts'), '');
    expect(problems(join(tmp, 'docs', 'a.md'), tmp)).toEqual([
      'docs/a.md:3: link to missing.md: docs/missing.md does not exist',
      'docs/a.md:3: link to b.md#nope: no heading with the anchor #nope',
      'docs/a.md:3: link to #nowhere: no heading with the anchor #nowhere',
      'docs/a.md:4: "SPEC 3.5" refers to a document outside the repository',
      'docs/a.md:4: "SPEC.md" refers to a document outside the repository',
    ]);
  });
});
