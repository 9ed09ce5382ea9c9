/**
 * The documentation stands on its own: every relative link of README.md, CHANGELOG.md,
 * bench/README.md, docs/ and the folder READMEs under src/ resolves to a file of the repository (and
 * an `#anchor` to a heading of the file it names), and no Markdown file points outside the repository
 * (to a design document, its sections, a shared folder or seed documents that a clone does not contain).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SKIPPED_DIRECTORIES = new Set(['node_modules', '.git', 'dist', 'data', 'test']);

function markdownFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return SKIPPED_DIRECTORIES.has(e.name) ? [] : markdownFiles(p);
    return p.endsWith('.md') ? [p] : [];
  });
}

const linked = [
  'README.md',
  'CHANGELOG.md',
  'bench/README.md',
  ...markdownFiles('docs'),
  ...markdownFiles('src').filter((f) => path.basename(f) === 'README.md'),
];

/** Markdown without its fenced code blocks and inline code, where link syntax is only an example. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(fs.readFileSync(file, 'utf8')).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function relativeLinks(file: string): string[] {
  return [...prose(fs.readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('relative links in the documentation resolve', () => {
  it('finds the documents, and links in them', () => {
    expect(linked).toEqual(
      expect.arrayContaining([
        'README.md',
        'CHANGELOG.md',
        'bench/README.md',
        'docs/design.md',
        'src/scheduler/README.md',
      ]),
    );
    expect(relativeLinks('README.md').length).toBeGreaterThan(10);
  });

  it.each(linked)('%s', (file) => {
    const broken: string[] = [];
    for (const target of relativeLinks(file)) {
      const [pathPart, anchor] = target.split('#') as [string, string | undefined];
      const resolved =
        pathPart === '' ? file : path.normalize(path.join(path.dirname(file), decodeURIComponent(pathPart)));
      if (resolved.startsWith('..') || path.isAbsolute(resolved) || !fs.existsSync(resolved)) {
        broken.push(`${target}: no such file`);
        continue;
      }
      if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor))
        broken.push(`${target}: no heading with that anchor`);
    }
    expect(broken).toEqual([]);
  });
});

describe('no Markdown file points outside the repository', () => {
  const everyMarkdownFile = markdownFiles('.').concat(markdownFiles('test'));
  it.each(everyMarkdownFile)('%s', (file) => {
    const text = fs.readFileSync(file, 'utf8');
    for (const outside of ['DESIGN.md', 'DESIGN §', '../shared', 'seeds/'])
      expect(text, `${file} mentions ${outside}`).not.toContain(outside);
  });
});

/** The source paths a document names in inline code (`src/scheduler/storage/pass.ts`, `services/input/validate.ts`). */
function namedSourcePaths(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return [...text.matchAll(/`([A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)+\/?)`/g)]
    .map((m) => m[1]!)
    .filter(
      (p) =>
        /\.(ts|js|mjs|cjs|json|md|sh|service)$/.test(p) ||
        /^(src|test|bench|bin|docs|migrations|deploy|examples)\//.test(p),
    );
}

describe('the source files the documentation names exist', () => {
  // A path is looked for from the repository's root, under src/ (the docs often leave it out), and beside the document.
  // What the build and the tests make (dist/, test/artifacts/) is not in a clone.
  const generated = (named: string) => /^(dist|test\/artifacts|data)\//.test(named);
  const exists = (file: string, named: string) =>
    generated(named) ||
    [
      named,
      path.join('src', named),
      path.join(path.dirname(file), named),
      path.join(path.dirname(file), '..', named),
    ].some((p) => fs.existsSync(p));
  it.each(linked.filter((f) => f !== 'CHANGELOG.md'))('%s', (file) => {
    expect(namedSourcePaths(file).filter((named) => !exists(file, named))).toEqual([]);
  });
});

/** Every .ts file of the repository (but node_modules), by its name: a comment may name a module by its file name alone. */
function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return ['node_modules', '.git', 'dist', 'data'].includes(e.name) ? [] : sourceFiles(p);
    return /\.(ts|md)$/.test(e.name) ? [p] : [];
  });
}

/** The comments of a TypeScript file: block comments and line comments, as text. */
function comments(text: string): string[] {
  return [...text.matchAll(/\/\*[\s\S]*?\*\/|(?<![:'"`\\])\/\/[^\n]*/g)].map((m) => m[0]);
}

describe('what the comments of src/ name exists', () => {
  const everyFile = [
    ...sourceFiles('src'),
    ...sourceFiles('test'),
    ...sourceFiles('bench'),
    ...sourceFiles('docs'),
    'README.md',
    'CHANGELOG.md',
  ];
  const byName = new Set(everyFile.map((f) => path.basename(f)));
  const named = (file: string, name: string) =>
    name.includes('/')
      ? [
          name,
          path.join('src', name),
          path.join(path.dirname(file), name),
          path.join(path.dirname(file), '..', name),
          path.join(path.dirname(file), '..', '..', name),
        ].some((p) => fs.existsSync(p)) || everyFile.some((f) => f.endsWith(`/${name}`))
      : byName.has(name) || fs.existsSync(path.join(path.dirname(file), name));
  const sources = sourceFiles('src').filter((f) => f.endsWith('.ts'));

  it('reads the comments', () => {
    expect(sources.length).toBeGreaterThan(200);
  });

  it.each(sources)('%s', (file) => {
    const missing: string[] = [];
    for (const comment of comments(fs.readFileSync(file, 'utf8'))) {
      // A file: a name ending in .ts or .md (a placeholder in capitals, NAME.md, is not a file).
      for (const m of comment.matchAll(
        /(?<![A-Za-z0-9_./@-])((?:\.\.?\/)*[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*\.(?:ts|md))(?![A-Za-z0-9_])/g,
      )) {
        if (/^[A-Z_]+\./.test(path.basename(m[1]!))) continue;
        if (!named(file, m[1]!)) missing.push(m[1]!);
      }
      // A section of a document: `docs/x.md, "Heading"` or `README, "Heading"`.
      for (const m of comment.matchAll(/((?:[A-Za-z0-9_.-]+\/)*[A-Za-z0-9_.-]+\.md|README)[,:]?\s+["“]([^"”]+)["”]/g)) {
        const doc = m[1] === 'README' ? 'README.md' : everyFile.find((f) => f === m[1] || f.endsWith(`/${m[1]}`));
        const heading = m[2]!.replace(/\s*\n\s*(\*\s*|\/\/\s*)?/g, ' ');
        if (!doc || !anchors(doc).has(slug(heading))) missing.push(`${m[1]}, "${heading}"`);
      }
      for (const outside of ['DESIGN.md', '../shared', 'seeds/']) if (comment.includes(outside)) missing.push(outside);
    }
    expect(missing).toEqual([]);
  });
});
