/**
 * Coming work has one home (src/scheduler/rules/look-ahead.ts) in two forms. On generated BLOCKED
 * requests with dependencies in every status, PostgreSQL's isComingWorkSql says what isComingWork
 * says of the same rows. The rows are common table expressions named like the tables.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WORK_REQUEST_STATUSES } from '../../../src/core/work-request-status.js';
import { isComingWork, isComingWorkSql } from '../../../src/scheduler/rules/look-ahead.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

describe('coming work in SQL and in TypeScript', () => {
  it.each([
    [['RUNNING'], true],
    [['ASSIGNED', 'COMPLETED'], true],
    [['COMPLETED'], false], // nothing left to wait for: it is about to be queued, not coming
    [['RUNNING', 'PENDING'], false], // waits on work that may never be schedulable
    [['RUNNING', 'BLOCKED'], false],
    [['RUNNING', 'ABORTED'], false],
    [[], false],
  ])('dependencies %j: coming is %s', (statuses, coming) => {
    expect(isComingWork(statuses)).toBe(coming);
  });

  it('agree on generated dependencies', async () => {
    const arb = fc.array(fc.array(fc.constantFrom(...WORK_REQUEST_STATUSES), { maxLength: 4 }), {
      minLength: 1,
      maxLength: 10,
    });
    await fc.assert(
      fc.asyncProperty(arb, async (blocked) => {
        // Request ids: the blocked ones 1..n, their dependencies from 1000 on.
        const deps = blocked.flatMap((statuses, i) =>
          statuses.map((status, j) => ({ id: i + 1, dep: 1000 + i * 10 + j, status })),
        );
        const requests = [
          ...blocked.map((_, i) => ({ id: i + 1, status: 'BLOCKED' })),
          ...deps.map((d) => ({ id: d.dep, status: d.status })),
        ];
        const rows = await t.sql<{ id: number; coming: boolean }>(
          `with work_request(id, status) as (values ${requests.map(() => '(?::int, ?::text)').join(', ')}),
                work_request_dependency(work_request_id, depends_on_id) as (select * from (values ${deps.length ? deps.map(() => '(?::int, ?::int)').join(', ') : '(null::int, null::int)'}) v(a, b) where v.a is not null)
           select b.id, ${isComingWorkSql('b')} as coming from work_request b where b.status = 'BLOCKED' and b.id < 1000 order by b.id`,
          [...requests.flatMap((r) => [r.id, r.status]), ...deps.flatMap((d) => [d.id, d.dep])],
        );
        expect(rows).toEqual(blocked.map((statuses, i) => ({ id: i + 1, coming: isComingWork(statuses) })));
      }),
      { numRuns: 60 },
    );
  });
});
