/**
 * A worker's active work and capacity have one home (src/scheduler/rules/active-work.ts) in two forms.
 * On generated workers and requests of every status, PostgreSQL's answers to activeWorkSql,
 * activeByWorkerSql and hasFreeSlotSql equal what isActive and freeSlots say of the same rows. The
 * rows are common table expressions named like the tables, so the fragments read them unchanged.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isActive, WORK_REQUEST_STATUSES } from '../../../src/core/work-request-status.js';
import {
  activeByWorkerSql,
  activeWorkSql,
  freeSlots,
  hasFreeSlotSql,
  isActiveSql,
  isUnacknowledged,
  isUnacknowledgedSql,
} from '../../../src/scheduler/rules/active-work.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const workersArb = fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 12 });
const requestArb = (workers: number) =>
  fc.record({
    worker: fc.option(fc.integer({ min: 1, max: workers }), { nil: null }),
    status: fc.constantFrom(...WORK_REQUEST_STATUSES),
  });
const farmArb = workersArb.chain((concurrency) =>
  fc.record({
    concurrency: fc.constant(concurrency),
    requests: fc.array(requestArb(concurrency.length), { maxLength: 40 }),
  }),
);

describe('active work and capacity in SQL and in TypeScript', () => {
  it('the counts, the per-worker relation and the free-slot condition agree with isActive and freeSlots', async () => {
    await fc.assert(
      fc.asyncProperty(farmArb, async ({ concurrency, requests }) => {
        const workers = concurrency.map((c, i) => ({ id: i + 1, concurrency: c }));
        const requestRows = requests.length
          ? requests.map(() => '(?::int, ?::text)').join(', ')
          : '(null::int, null::text)';
        const requestParams = requests.length ? requests.flatMap((r) => [r.worker, r.status]) : [];
        const rows = await t.sql<{
          id: number;
          active: number;
          grouped: number | null;
          free: boolean;
          statuses: number;
        }>(
          `with worker(id, concurrency) as (values ${workers.map(() => '(?::int, ?::int)').join(', ')}),
                work_request(worker_id, status) as (select * from (values ${requestRows}) v(worker_id, status) where v.status is not null)
           select w.id, ${activeWorkSql('w.id')} as active, g.active as grouped, ${hasFreeSlotSql('w')} as free,
                  (select count(*)::int from work_request r where r.worker_id = w.id and ${isActiveSql('r')}) as statuses
             from worker w left join ${activeByWorkerSql()} g on g.worker_id = w.id
            order by w.id`,
          [...workers.flatMap((w) => [w.id, w.concurrency]), ...requestParams],
        );
        const expected = workers.map((w) => {
          const active = requests.filter((r) => r.worker === w.id && isActive(r.status)).length;
          return {
            id: w.id,
            active,
            grouped: active || null,
            free: freeSlots(w.concurrency, active) > 0,
            statuses: active,
          };
        });
        expect(rows).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });

  it('isUnacknowledgedSql is true exactly where isUnacknowledged is, for every status', async () => {
    const rows = await t.sql<{ status: string; sql: boolean }>(
      `select s as status, ${isUnacknowledgedSql('r')} as sql from unnest(?::text[]) as s, lateral (select s as status) r`,
      [`{${WORK_REQUEST_STATUSES.join(',')}}`],
    );
    expect(rows.map((r) => [r.status, r.sql])).toEqual(WORK_REQUEST_STATUSES.map((s) => [s, isUnacknowledged(s)]));
    expect(WORK_REQUEST_STATUSES.filter(isUnacknowledged)).toEqual(['ASSIGNED']);
  });

  it('isActive holds for ASSIGNED and RUNNING only; freeSlots never goes below 0', () => {
    expect(WORK_REQUEST_STATUSES.filter(isActive)).toEqual(['ASSIGNED', 'RUNNING']);
    expect([freeSlots(2, 0), freeSlots(2, 1), freeSlots(2, 2), freeSlots(1, 3), freeSlots(0, 0)]).toEqual([
      2, 1, 0, 0, 0,
    ]);
  });
});
