/**
 * The work-request statuses and their sets have one home (src/core/work-request-status.ts): each set's
 * TypeScript predicate and its SQL list say the same of every status, in PostgreSQL; the sets are
 * those the statuses' life gives (active and queued make the unfinished, the finished are the rest).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ACTIVE_SQL,
  ACTIVE_STATUSES,
  FINISHED_SQL,
  FINISHED_STATUSES,
  isActive,
  isFinished,
  isPendingOrActive,
  isQueued,
  isUnfinished,
  PENDING_OR_ACTIVE_SQL,
  PENDING_OR_ACTIVE_STATUSES,
  QUEUED_SQL,
  QUEUED_STATUSES,
  UNFINISHED_SQL,
  UNFINISHED_STATUSES,
  WORK_REQUEST_STATUS,
  WORK_REQUEST_STATUSES,
} from '../../src/core/work-request-status.js';
import { adminUrl } from '../helpers/pg-url.js';

const SETS = [
  ['queued', QUEUED_STATUSES, isQueued, QUEUED_SQL],
  ['active', ACTIVE_STATUSES, isActive, ACTIVE_SQL],
  ['pending or active', PENDING_OR_ACTIVE_STATUSES, isPendingOrActive, PENDING_OR_ACTIVE_SQL],
  ['finished', FINISHED_STATUSES, isFinished, FINISHED_SQL],
  ['unfinished', UNFINISHED_STATUSES, isUnfinished, UNFINISHED_SQL],
] as const;

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
});

describe('the work-request statuses', () => {
  it('are the constants, in the order of a request’s life', () => {
    expect(WORK_REQUEST_STATUSES).toEqual(Object.values(WORK_REQUEST_STATUS));
    expect(WORK_REQUEST_STATUSES).toEqual(['BLOCKED', 'PENDING', 'ASSIGNED', 'RUNNING', 'COMPLETED', 'ABORTED']);
  });

  it('make the sets of a request’s life', () => {
    expect(FINISHED_SQL).toBe(`'COMPLETED', 'ABORTED'`);
    expect(ACTIVE_SQL).toBe(`'ASSIGNED', 'RUNNING'`);
    expect(UNFINISHED_STATUSES).toEqual(WORK_REQUEST_STATUSES.filter((s) => !isFinished(s)));
    expect([...QUEUED_STATUSES, ...ACTIVE_STATUSES].sort()).toEqual([...UNFINISHED_STATUSES].sort());
    expect(QUEUED_STATUSES.filter(isActive)).toEqual([]);
    expect(PENDING_OR_ACTIVE_STATUSES).toEqual(['PENDING', ...ACTIVE_STATUSES]);
  });

  it.each(SETS)(
    '%s: the predicate and `status in (SQL)` agree on every status, and on an unknown one',
    async (_name, statuses, predicate, sql) => {
      const all = [...WORK_REQUEST_STATUSES, 'NOT_A_STATUS'];
      expect(all.filter(predicate)).toEqual(statuses);
      const { rows } = await client.query<{ s: string; member: boolean }>(
        `select s, s in (${sql}) as member from unnest($1::text[]) with ordinality as u(s, i) order by i`,
        [all],
      );
      expect(rows.map((r) => r.member)).toEqual(all.map(predicate));
    },
  );
});
