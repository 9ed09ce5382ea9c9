/**
 * The fit of a class to a worker has one home (src/scheduler/rules/fit.ts). On generated classes and
 * workers, with plain and valued tags and minimums on both sides: PostgreSQL's mayFitSql equals the
 * TypeScript prefilter mayFit; classFits implies it (the prefilter never drops a fitting worker) and
 * equals it when no tag on either side is a minimum; fitsOf equals classFits; classMismatch names what
 * matchTags names.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { textArray } from '../../../src/storage/db/arrays.js';
import {
  classFits,
  classMismatch,
  fitsOf,
  mayFit,
  mayFitParams,
  mayFitSql,
  providedIndexOf,
  type TaskClassRow,
  type WorkerTags,
} from '../../../src/scheduler/rules/fit.js';
import { matchTags } from '../../../src/core/tags/match.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const subset = (tags: string[]) => fc.subarray(tags, { maxLength: 4 });
const classArb = fc.record({
  id: fc.constant(1),
  requiredTags: subset(['os:linux', 'arch:x86', 'worker:memory-gib>=4', 'worker:cpu-count>=2', 'worker:cpu-count>=8']),
  significantProvidedTags: subset(['team:a', 'secure', 'worker:memory-gib=8', 'zone=2']),
}) satisfies fc.Arbitrary<TaskClassRow>;
const workerArb = fc.record({
  type: fc.constantFrom('worker', 'worker', 'not-assignable'),
  providedTags: subset([
    'os:linux',
    'arch:x86',
    'worker:memory-gib=2',
    'worker:memory-gib=16',
    'worker:cpu-count=4',
    'team:a',
  ]),
  requiredTags: subset(['team:a', 'secure', 'zone>=1', 'worker:memory-gib>=4']),
}) satisfies fc.Arbitrary<WorkerTags>;

const hasMinimum = (c: TaskClassRow, w: WorkerTags) =>
  [...c.requiredTags, ...w.requiredTags].some((tag) => tag.includes('>='));

describe('the fit of a class to a worker in SQL and in TypeScript', () => {
  it('mayFitSql equals mayFit; classFits implies it, and equals it without minimums', async () => {
    await fc.assert(
      fc.asyncProperty(classArb, fc.array(workerArb, { minLength: 1, maxLength: 20 }), async (c, workers) => {
        const rows = await t.sql<{ n: number; may: boolean }>(
          `select w.n, ${mayFitSql('w')} as may
             from (values ${workers.map(() => '(?::int, ?::text[], ?::text[])').join(', ')}) as w(n, provided_tags, required_tags)
            order by w.n`,
          [...mayFitParams(c), ...workers.flatMap((w, n) => [n, textArray(w.providedTags), textArray(w.requiredTags)])],
        );
        expect(rows.map((r) => r.may)).toEqual(workers.map((w) => mayFit(c, w)));
        for (const w of workers) {
          if (classFits(c, w)) expect(mayFit(c, w), JSON.stringify({ c, w })).toBe(true);
          if (!hasMinimum(c, w) && w.type !== 'not-assignable')
            expect(classFits(c, w), JSON.stringify({ c, w })).toBe(mayFit(c, w));
        }
      }),
      { numRuns: 60 },
    );
  });

  it('fitsOf and classMismatch say what classFits and matchTags say', () => {
    fc.assert(
      fc.property(classArb, workerArb, (c, w) => {
        expect(fitsOf(w)(c)).toBe(classFits(c, w));
        const m = matchTags(
          { provided: c.significantProvidedTags, required: c.requiredTags },
          { provided: w.providedTags, required: w.requiredTags },
        );
        expect(classMismatch(c, { index: providedIndexOf(w.providedTags), requiredTags: w.requiredTags })).toEqual({
          missingOnWorker: m.missingOnWorker,
          missingOnTask: m.missingOnTask,
        });
        if (w.type === 'not-assignable') expect(classFits(c, w)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('a table of cases: valued tags by >=, plain tags by identity, both ways', () => {
    const c = (requiredTags: string[], significantProvidedTags: string[] = []): TaskClassRow => ({
      id: 1,
      requiredTags,
      significantProvidedTags,
    });
    const w = (providedTags: string[], requiredTags: string[] = []): WorkerTags => ({
      type: 'worker',
      providedTags,
      requiredTags,
    });
    const cases: [TaskClassRow, WorkerTags, boolean][] = [
      [c(['worker:memory-gib>=4']), w(['worker:memory-gib=4']), true],
      [c(['worker:memory-gib>=4']), w(['worker:memory-gib=3']), false],
      [c(['os:linux']), w(['os:linux=1']), false],
      [c([], ['team:a']), w([], ['team:a']), true],
      [c([], []), w([], ['team:a']), false],
      [c([], ['zone=3']), w([], ['zone>=2']), true],
    ];
    expect(cases.map(([cls, worker]) => classFits(cls, worker))).toEqual(cases.map(([, , fits]) => fits));
  });
});
