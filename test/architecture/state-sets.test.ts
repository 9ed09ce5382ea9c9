/**
 * Every set of work-request statuses and of instance states is named once, in its home
 * (src/core/work-request-status.ts, src/core/instance-state.ts), with its predicate and its SQL list:
 * no other file of src/ spells a list of them by hand, that is, quotes two or more of the status or
 * state names side by side, as the items of a TypeScript array or of a SQL `in (...)`. A condition on
 * one status (`status = 'PENDING'`) and a union type of an operation's outcomes are not lists.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { INSTANCE_STATES } from '../../src/core/instance-state.js';
import { WORK_REQUEST_STATUSES } from '../../src/core/work-request-status.js';

/** The files where the lists live. */
const HOMES = ['src/core/work-request-status.ts', 'src/core/instance-state.ts'];

const NAMES = [...new Set<string>([...WORK_REQUEST_STATUSES, ...INSTANCE_STATES])];
const NAME = `(?:${NAMES.join('|')})`;
/** Two or more quoted names (in single, double or back quotes) with only a comma and white space between each two. */
const LIST = new RegExp(`(['"\`])${NAME}\\1(?:\\s*,\\s*(['"\`])${NAME}\\2)+`, 'g');

/** The hand-spelled lists in a text, each with its line number. */
function listsIn(text: string): { line: number; list: string }[] {
  return [...text.matchAll(LIST)].map((m) => ({
    line: text.slice(0, m.index).split('\n').length,
    list: m[0].replace(/\s+/g, ' '),
  }));
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('the detector of a status or state list', () => {
  it.each([
    [`const FINISHED = ['COMPLETED', 'ABORTED'] as const;`],
    [`new Set(["COMPLETED", "ABORTED"])`],
    [`where status in ('BLOCKED', 'PENDING', \${ACTIVE_SQL})`],
    [`"status" in ('BLOCKED', 'PENDING', 'ASSIGNED', 'RUNNING')`],
    [`and i.state in ('LAUNCHING',\n      'RUNNING')`],
    [`status: ['ASSIGNED', 'RUNNING']`],
    ['[`STOPPING`, `FAILED`]'],
  ])('finds %j', (text) => {
    expect(listsIn(text)).toHaveLength(1);
  });

  it.each([
    [`where status = 'PENDING' and state = 'RUNNING'`],
    [`status in ('PENDING', \${ACTIVE_SQL})`],
    [`readonly status: 'PENDING' | 'ABORTED';`],
    [`case 'ASSIGNED':\n    case 'RUNNING':`],
    [`{ state: 'FAILED', error }`],
    [`['RUNNINGS', 'ABORTED']`],
    [`'COMPLETED", "ABORTED'`],
  ])('leaves %j', (text) => {
    expect(listsIn(text)).toEqual([]);
  });

  it('gives the line of each list', () => {
    expect(listsIn(`a\nb\nx = ['TERMINATED', 'FAILED'];\ny = ["BLOCKED",\n "PENDING", "RUNNING"]`)).toEqual([
      { line: 3, list: `'TERMINATED', 'FAILED'` },
      { line: 4, list: `"BLOCKED", "PENDING", "RUNNING"` },
    ]);
  });
});

describe('status and state lists in src/', () => {
  const files = sourceFiles('src');

  it('reads every source file, the homes among them', () => {
    expect(files.length).toBeGreaterThan(200);
    for (const home of HOMES) expect(files).toContain(path.normalize(home));
    expect(NAMES).toEqual(
      expect.arrayContaining(['BLOCKED', 'COMPLETED', 'ABORTED', 'LAUNCHING', 'STOPPING', 'TERMINATED', 'FAILED']),
    );
  });

  it('are spelled only in their homes', () => {
    const found = files
      .filter((f) => !HOMES.map((h) => path.normalize(h)).includes(f))
      .flatMap((f) => listsIn(fs.readFileSync(f, 'utf8')).map(({ line, list }) => `${f}:${line}: ${list}`));
    expect(found).toEqual([]);
  });
});
