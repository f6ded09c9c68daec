/**
 * Every relative link in README.md and docs/ stays alive: `[x](path)`, `[x](path#anchor)` and `[x](#anchor)` (and
 * reference definitions `[x]: path`) resolve to a file or folder of the repository, and every anchor names a heading
 * of its target, by GitHub's slug rules. Links with a scheme (http:, https:, mailto:) and links inside code blocks or
 * code spans are not checked.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** README.md and every Markdown file under docs/, as paths relative to the repository root. */
function markdownFiles(): string[] {
  const found = ['README.md'];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) found.push(rel);
    }
  };
  if (fs.existsSync(path.join(ROOT, 'docs'))) walk('docs');
  return found.sort();
}

/** The text with fenced code blocks blanked out (line count kept, so line numbers stay right). */
function withoutFences(text: string): string[] {
  let fence: string | null = null;
  return text.split('\n').map((line) => {
    const open = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === null && open) {
      fence = open[1]![0]!.repeat(open[1]!.length);
      return '';
    }
    if (fence !== null) {
      if (line.trim().startsWith(fence) && /^[`~]+$/.test(line.trim())) fence = null;
      return '';
    }
    return line;
  });
}

/** A line with its code spans blanked out. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)[\s\S]*?\1/g, (m) => ' '.repeat(m.length));
}

/** GitHub's heading id: the heading's text, lowercased, punctuation dropped (hyphens and underscores kept), spaces to hyphens. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link or image counts as its text
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a Markdown text offers: its headings' slugs (duplicates get -1, -2, ...) and explicit HTML ids. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const ids = new Set<string>();
  for (const line of withoutFences(text)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      ids.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"/g)) ids.add(m[1]!);
  }
  return ids;
}

export interface Link {
  line: number;
  target: string;
}

/** The links of a Markdown text outside code: inline links and images, and reference definitions. */
export function links(text: string): Link[] {
  const found: Link[] = [];
  withoutFences(text).forEach((raw, i) => {
    const line = withoutCodeSpans(raw);
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ line: i + 1, target: m[1]! });
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(line);
    if (definition) found.push({ line: i + 1, target: definition[1]! });
  });
  return found;
}

/** Why `link` in `file` (relative to `root`) is broken, or null when it resolves. */
export function problem(root: string, file: string, link: Link, read: (abs: string) => string | null): string | null {
  const { target } = link;
  if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) return null;
  const hash = target.indexOf('#');
  const pathPart = decodeURI(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
  const abs = pathPart === '' ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), pathPart);
  if (path.relative(root, abs).startsWith('..')) return `${target}: leaves the repository`;
  const text = read(abs);
  if (text === null) return `${target}: no such file or folder (${path.relative(root, abs) || '.'})`;
  if (anchor === null) return null;
  if (!abs.endsWith('.md')) return /^L\d+(-L\d+)?$/.test(anchor) ? null : `${target}: an anchor into a file that is not Markdown`;
  if (!anchors(text).has(anchor)) return `${target}: no heading "#${anchor}" in ${path.relative(root, abs)}`;
  return null;
}

/** The file's text, '' for a folder, null when nothing is there. */
function readFromDisk(abs: string): string | null {
  if (!fs.existsSync(abs)) return null;
  return fs.statSync(abs).isDirectory() ? '' : fs.readFileSync(abs, 'utf8');
}

describe('documentation links', () => {
  const files = markdownFiles();

  it('finds README.md and the docs pages', () => {
    expect(files).toContain('README.md');
    expect(files).toContain('docs/README.md');
  });

  it.each(files)('every relative link and anchor in %s resolves', (file) => {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    const broken = links(text).flatMap((l) => {
      const why = problem(ROOT, file, l, readFromDisk);
      return why ? [`${file}:${l.line}: ${why}`] : [];
    });
    expect(broken).toEqual([]);
  });

  it('README.md stays under 150 lines', () => {
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length).toBeLessThan(150);
  });
});

describe('the link checker itself', () => {
  const pages: Record<string, string> = {
    '/r/README.md': '# Top\n\nSee [a](docs/a.md#two-words) and [gone](docs/gone.md).\n',
    '/r/docs/a.md': [
      '# A page',
      '## Two words',
      '## Two words',
      '## `code` and punctuation: (yes)!',
      '## snake_case and ümlaut',
      '```sh',
      '# not a heading',
      '[in a fence](missing.md)',
      '```',
      'Links: [dup](#two-words-1) [code](#code-and-punctuation-yes) [u](#snake_case-and-ümlaut) [bad](#not-a-heading)',
      'Spans: `[in a span](missing.md)` [web](https://example.com/x#y) [up](../README.md#top) [out](../../x.md)',
      '[ref]: ./a.md#a-page',
    ].join('\n'),
  };
  const read = (abs: string): string | null => pages[abs] ?? (abs === '/r/docs' ? '' : null);
  const check = (file: string) =>
    links(pages[`/r/${file}`]!)
      .map((l) => problem('/r', file, l, read))
      .filter((p) => p !== null);

  it('slugs headings as GitHub does', () => {
    expect(slug('`code` and punctuation: (yes)!')).toBe('code-and-punctuation-yes');
    expect(slug('Owner handoff and owner move')).toBe('owner-handoff-and-owner-move');
    expect(slug("How a reconfiguration ends, in Temporal's own status")).toBe('how-a-reconfiguration-ends-in-temporals-own-status');
    expect(slug('A -- B')).toBe('a----b');
    expect([...anchors(pages['/r/docs/a.md']!)]).toEqual(['a-page', 'two-words', 'two-words-1', 'code-and-punctuation-yes', 'snake_case-and-ümlaut']);
  });

  it('reports a missing file and a missing anchor, and nothing in code or with a scheme', () => {
    expect(check('README.md')).toEqual(['docs/gone.md: no such file or folder (docs/gone.md)']);
    expect(check('docs/a.md')).toEqual(['#not-a-heading: no heading "#not-a-heading" in docs/a.md', '../../x.md: leaves the repository']);
  });
});
