/**
 * docs/reference/configuration.md is the user's guide to every setting: each variable the service reads
 * (src/core/config.ts, the one place that reads the environment) has exactly one row in its configuration
 * table, no table lists a variable twice, and every other `TAGSCHED_*` name the code uses (the agent's
 * options, what handlers are given, the admin CLI's) is written in it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const CONFIGURATION = 'docs/reference/configuration.md';
const reference = fs.readFileSync(CONFIGURATION, 'utf8');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** The variable named in the first cell of each row of each Markdown table, table by table. */
function tables(markdown: string): string[][] {
  const out: string[][] = [];
  let current: string[] | null = null;
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('|')) {
      current = null;
      continue;
    }
    if (!current) out.push((current = []));
    const first = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/.exec(line);
    if (first) current.push(first[1]!);
  }
  return out.filter((t) => t.length > 0);
}

describe('the configuration reference documents every setting', () => {
  const config = fs.readFileSync('src/core/config.ts', 'utf8');
  const serverVariables = [...new Set([...config.matchAll(/'((?:TAGSCHED_[A-Z0-9_]+)|PORT|HOST)'|env\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1] ?? m[2]))].sort();
  const all = tables(reference);
  const serverTable = all.find((t) => t.includes('PORT')) ?? [];

  it('finds the variables src/core/config.ts reads, and the table of the service', () => {
    expect(serverVariables).toEqual(expect.arrayContaining(['PORT', 'DATABASE_URL', 'TAGSCHED_ADMIN_TOKEN', 'NODE_ENV']));
    expect(serverTable.length).toBeGreaterThanOrEqual(serverVariables.length);
  });

  it.each(serverVariables)('%s has exactly one row in the configuration table', (name) => {
    expect(serverTable.filter((n) => n === name)).toHaveLength(1);
  });

  it('the service table lists only variables src/core/config.ts reads', () => {
    expect(serverTable.filter((n) => !serverVariables.includes(n))).toEqual([]);
  });

  it('no table lists a variable twice', () => {
    const duplicates = all.flatMap((t) => t.filter((n, i) => t.indexOf(n) !== i));
    expect(duplicates).toEqual([]);
  });

  const elsewhere = [...new Set(sources('src').flatMap((f) => [...fs.readFileSync(f, 'utf8').matchAll(/\bTAGSCHED_[A-Z0-9_]+\b/g)].map((m) => m[0])))].sort();
  it.each(elsewhere)(`%s is written in ${CONFIGURATION}`, (name) => {
    expect(reference).toContain(`\`${name}\``);
  });
});
