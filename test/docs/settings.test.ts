/**
 * The README is the user's guide to every setting: each variable the service reads (src/config.ts, the
 * one place that reads the environment) has a row in its configuration table, and every other
 * `TAGSCHED_*` name the code uses (the agent's options, what handlers are given) is written in it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const readme = fs.readFileSync('README.md', 'utf8');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('the README documents every setting', () => {
  const config = fs.readFileSync('src/config.ts', 'utf8');
  const serverVariables = [...new Set([...config.matchAll(/'((?:TAGSCHED_[A-Z0-9_]+)|PORT|HOST)'|env\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1] ?? m[2]))].sort();

  it('finds the variables src/config.ts reads', () => {
    expect(serverVariables).toEqual(expect.arrayContaining(['PORT', 'DATABASE_URL', 'TAGSCHED_ADMIN_TOKEN', 'NODE_ENV']));
  });

  it.each(serverVariables)('%s has a row in the configuration table', (name) => {
    expect(readme).toMatch(new RegExp(`^\\| \`${name}\` \\|`, 'm'));
  });

  const elsewhere = [...new Set(sources('src').flatMap((f) => [...fs.readFileSync(f, 'utf8').matchAll(/\bTAGSCHED_[A-Z0-9_]+\b/g)].map((m) => m[0])))].sort();
  it.each(elsewhere)('%s is written in the README', (name) => {
    expect(readme).toContain(`\`${name}\``);
  });
});
