/**
 * The release backoff has one home (src/scheduler/rules/release-backoff.ts) in two forms. On generated
 * backoffs around now (to the millisecond), PostgreSQL's notBackedOffSql for each request and worker
 * is the negation of isBackedOff over the same backoffs. The backoffs are a common table expression
 * named like the table, so the fragment reads them unchanged.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  isBackedOff,
  notBackedOffParams,
  notBackedOffSql,
  type Backoff,
} from '../../../src/scheduler/rules/release-backoff.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const NOW = new Date('2026-06-01T12:00:00.000Z');
const backoffArb = fc.record({
  request: fc.integer({ min: 1, max: 4 }),
  worker: fc.integer({ min: 1, max: 4 }),
  untilMs: fc.oneof(fc.constantFrom(-1, 0, 1), fc.integer({ min: -60_000, max: 60_000 })).map((d) => NOW.getTime() + d),
});

describe('release backoff in SQL and in TypeScript', () => {
  it('notBackedOffSql holds exactly when isBackedOff does not, for every request and worker', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(backoffArb, { maxLength: 12 }), async (backoffs) => {
        const pairs = [1, 2, 3, 4].flatMap((request) => [1, 2, 3, 4].map((worker) => ({ request, worker })));
        const rows = backoffs.length
          ? backoffs.map(() => '(?::int, ?::int, ?::timestamptz)').join(', ')
          : '(null::int, null::int, null::timestamptz)';
        const answers = await Promise.all(
          pairs.map(async ({ request, worker }) => {
            const [row] = await t.sql<{ free: boolean }>(
              `with release_backoff(work_request_id, worker_id, until) as (select * from (values ${rows}) v(r, w, u) where v.r is not null)
               select ${notBackedOffSql('x')} as free from (select ?::int as id) x`,
              [
                ...backoffs.flatMap((b) => [b.request, b.worker, new Date(b.untilMs)]),
                ...notBackedOffParams(worker, NOW),
                request,
              ],
            );
            return row.free;
          }),
        );
        const ofRequest = (request: number): Backoff[] =>
          backoffs
            .filter((b) => b.request === request)
            .map((b) => ({ workerId: b.worker, until: new Date(b.untilMs) }));
        expect(answers).toEqual(pairs.map(({ request, worker }) => !isBackedOff(ofRequest(request), worker, NOW)));
      }),
      { numRuns: 30 },
    );
  });
});
