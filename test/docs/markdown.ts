// A small reader of the repository's markdown, enough to check that every relative link
// and anchor resolves the way GitHub renders them: headings and their slugs, links and
// reference definitions outside code, and mentions of documents the repository does not
// hold.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** Folders that are not the project's own docs: dependencies, build output, generated API pages. */
const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', 'coverage', 'artifacts', 'api']);

/** Every `.md` file under `root`, outside dependencies and build output, sorted. */
export function markdownFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!SKIP_DIRS.has(entry.name)) walk(join(dir, entry.name));
      } else if (entry.isFile() && entry.name.endsWith('.md')) {
        out.push(join(dir, entry.name));
      }
    }
  };
  walk(root);
  return out.sort();
}

/** The lines of a markdown text with fenced code blocks blanked (their line numbers kept). */
export function proseLines(text: string): string[] {
  const lines = text.split('\n');
  let fence: string | undefined;
  return lines.map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      return '';
    }
    if (marker !== undefined) {
      fence = marker;
      return '';
    }
    return line;
  });
}

/**
 * GitHub's anchor for a heading: inline markup removed, lower-cased, every character
 * that is not a letter, digit, space, `-` or `_` dropped, spaces turned into `-`.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '');
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a markdown text offers: its headings' slugs (repeats numbered as GitHub does) and explicit ids. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of proseLines(text)) {
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1] ?? '');
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const id of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) if (id[1]) out.add(id[1]);
  }
  return out;
}

export interface Link {
  line: number;
  target: string;
}

/** Inline links, images and reference definitions outside code spans and fences. */
export function links(text: string): Link[] {
  const out: Link[] = [];
  proseLines(text).forEach((raw, i) => {
    const line = raw.replace(/(`+)[^`]*?\1/g, (s) => ' '.repeat(s.length));
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ line: i + 1, target: m[1] ?? '' });
    const def = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$/.exec(line);
    if (def?.[1] !== undefined) out.push({ line: i + 1, target: def[1] });
  });
  return out;
}

/** Mentions of the behaviour contract that lives outside the repository. */
export function outsideReferences(text: string): Link[] {
  const out: Link[] = [];
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(/SPEC\.md|\bSPEC\b(?:\s+(?:section\s+)?\d+(?:\.\d+)*)?/g)) out.push({ line: i + 1, target: m[0] });
  });
  return out;
}

/** Every problem of one markdown file, as `file:line: message` (paths relative to root). */
export function problems(file: string, root: string, cache = new Map<string, Set<string>>()): string[] {
  const text = readFileSync(file, 'utf8');
  const where = (line: number) => `${relative(root, file)}:${line}`;
  const out: string[] = [];
  const anchorsOf = (path: string) => {
    let set = cache.get(path);
    if (!set) {
      set = anchors(readFileSync(path, 'utf8'));
      cache.set(path, set);
    }
    return set;
  };
  for (const { line, target } of links(text)) {
    if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent((hash === -1 ? target : target.slice(0, hash)).replace(/\?.*$/, ''));
    const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const dest = pathPart === '' ? file : pathPart.startsWith('/') ? join(root, pathPart) : resolve(dirname(file), pathPart);
    if (!existsSync(dest)) {
      out.push(`${where(line)}: link to ${target}: ${relative(root, dest)} does not exist`);
      continue;
    }
    if (anchor === undefined) continue;
    if (statSync(dest).isFile() && dest.endsWith('.md')) {
      if (!anchorsOf(dest).has(anchor)) out.push(`${where(line)}: link to ${target}: no heading with the anchor #${anchor}`);
    } else if (!/^L\d+(-L\d+)?$/.test(anchor)) {
      out.push(`${where(line)}: link to ${target}: #${anchor} is neither a markdown heading nor a line anchor`);
    }
  }
  for (const { line, target } of outsideReferences(text)) {
    out.push(`${where(line)}: "${target}" refers to a document outside the repository`);
  }
  return out;
}
