/**
 * docs/reference/configuration.md is the user's guide to every setting. The service's settings come in
 * sections, one file of src/core/config/ each (the one place that reads the environment), and the
 * reference has one table per section under "The service", headed "### Title (`section`)": each
 * variable a section's file reads has exactly one row, in the table of its section; a setting whose
 * reading line says `// for tests` is marked **For tests** in its row, and no other is; no table lists
 * a variable twice; and every other `TAGSCHED_*` name the code uses (the agent's options, what
 * handlers are given, the admin CLI's) is written in it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config/config.js';

const CONFIGURATION = 'docs/reference/configuration.md';
const CONFIG_DIR = 'src/core/config';
const reference = fs.readFileSync(CONFIGURATION, 'utf8');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** The variables a source reads: quoted names (`'TAGSCHED_…'`, `'PORT'`, `'HOST'`) and `env.NAME`. */
function variablesIn(text: string): string[] {
  return [
    ...new Set(
      [...text.matchAll(/'((?:TAGSCHED_[A-Z0-9_]+)|PORT|HOST)'|env\.([A-Z][A-Z0-9_]+)/g)].map((m) => (m[1] ?? m[2])!),
    ),
  ].sort();
}

interface Row {
  readonly name: string;
  readonly forTests: boolean;
}

/** Each Markdown table's rows (the variable in the first cell, and whether the row is marked For tests), with the heading above the table. */
function tables(markdown: string): { heading: string; rows: Row[] }[] {
  const out: { heading: string; rows: Row[] }[] = [];
  let heading = '';
  let current: Row[] | null = null;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('#')) heading = line;
    if (!line.startsWith('|')) {
      current = null;
      continue;
    }
    if (!current) out.push({ heading, rows: (current = []) });
    const first = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/.exec(line);
    if (first) current.push({ name: first[1]!, forTests: line.includes('**For tests') });
  }
  return out.filter((t) => t.rows.length > 0);
}

/** The section a file of src/core/config/ holds: its name in camel case (`server-workers.ts`: `serverWorkers`). */
const sectionOf = (file: string) => path.basename(file, '.ts').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

describe('the configuration reference documents every setting, by section', () => {
  const sections = Object.keys(loadConfig({})).sort();
  const files = fs.readdirSync(CONFIG_DIR).filter((f) => f.endsWith('.ts'));
  const sectionFiles = files.filter((f) => sections.includes(sectionOf(f)));
  const read = new Map(sectionFiles.map((f) => [sectionOf(f), fs.readFileSync(path.join(CONFIG_DIR, f), 'utf8')]));
  const variables = new Map([...read].map(([section, text]) => [section, variablesIn(text)]));
  const forTests = new Map(
    [...read].map(([section, text]) => [
      section,
      variablesIn(
        text
          .split('\n')
          .filter((l) => l.includes('// for tests'))
          .join('\n'),
      ),
    ]),
  );
  const all = tables(reference);
  const service = reference.slice(
    reference.indexOf('\n## The service'),
    reference.indexOf('\n## ', reference.indexOf('\n## The service') + 1),
  );
  const serviceTables = tables(service);
  const tableOf = (section: string) =>
    serviceTables.filter((t) => t.heading.startsWith('### ') && t.heading.endsWith(`(\`${section}\`)`));

  it('finds a file for every section, the variables they read, and a table for every section', () => {
    expect(sectionFiles.map(sectionOf).sort()).toEqual(sections);
    expect([...variables.values()].flat()).toEqual(
      expect.arrayContaining(['PORT', 'DATABASE_URL', 'TAGSCHED_ADMIN_TOKEN', 'NODE_ENV', 'TAGSCHED_SCHEDULER']),
    );
    for (const section of sections) expect(tableOf(section), section).toHaveLength(1);
    expect(serviceTables).toHaveLength(sections.length);
  });

  it('reads the environment only in the sections', () => {
    for (const f of files.filter((f) => !sectionFiles.includes(f)))
      expect(variablesIn(fs.readFileSync(path.join(CONFIG_DIR, f), 'utf8')), f).toEqual([]);
  });

  const cases = [...variables].flatMap(([section, names]) => names.map((name) => [name, section] as const));
  it.each(cases)('%s has exactly one row, in the table of the %s section', (name, section) => {
    expect(serviceTables.flatMap((t) => t.rows).filter((r) => r.name === name)).toHaveLength(1);
    expect(tableOf(section)[0]?.rows.map((r) => r.name)).toContain(name);
  });

  it.each(sections)(
    'the table of the %s section lists only variables its file reads, and marks For tests those it reads for tests',
    (section) => {
      const rows = tableOf(section)[0]?.rows ?? [];
      expect(rows.map((r) => r.name).filter((n) => !variables.get(section)!.includes(n))).toEqual([]);
      expect(
        rows
          .filter((r) => r.forTests)
          .map((r) => r.name)
          .sort(),
      ).toEqual(forTests.get(section));
    },
  );

  it('marks some settings For tests', () => {
    expect([...forTests.values()].flat().sort()).toEqual([
      'TAGSCHED_EC2_ENDPOINT',
      'TAGSCHED_HETZNER_API_URL',
      'TAGSCHED_SCHEDULER',
    ]);
  });

  it('no table lists a variable twice', () => {
    const duplicates = all.flatMap((t) => t.rows.map((r) => r.name).filter((n, i, names) => names.indexOf(n) !== i));
    expect(duplicates).toEqual([]);
  });

  const elsewhere = [
    ...new Set(
      sources('src').flatMap((f) =>
        [...fs.readFileSync(f, 'utf8').matchAll(/\bTAGSCHED_[A-Z0-9_]+\b/g)].map((m) => m[0]),
      ),
    ),
  ].sort();
  it.each(elsewhere)(`%s is written in ${CONFIGURATION}`, (name) => {
    expect(reference).toContain(`\`${name}\``);
  });
});
