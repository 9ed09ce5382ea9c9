/**
 * The counts PostgreSQL keeps (migrations worker_state and class_pending_count) against the tables
 * they summarise: the pending requests per class equal a count(*) of the queue, and each worker's
 * state row equals its worker row, after a mixed concurrent workload through the real paths:
 * creation and classification, pulls, passes, releases, completions, aborts, lease expiry, a
 * re-classification, deletions, a rolled-back change, and folds running alongside all of it.
 */
import { describe, expect, it } from 'vitest';
import { registerSignificantTags } from '../../src/scheduler/storage/classes.js';
import { compactPendingCounts, pendingByClass } from '../../src/scheduler/storage/pending-counts.js';
import { useTestApp } from '../helpers/app.js';
import {
  classifyPending,
  CONTENDED,
  contendedWorkers,
  insertPending,
  resetScheduling,
  seedScheduling,
  type RequestRow,
  type WorkerRow,
} from '../helpers/scheduler-fixtures.js';

const t = useTestApp();

const WORKERS = 24;
const CLASSES = CONTENDED.classes;
const workers: WorkerRow[] = contendedWorkers('count', WORKERS, 2);
let serial = 0;
/** Requests over the four classes; some provide `lane:fast`, which no worker requires yet (a re-classification later splits them off). */
const batch = (n: number): RequestRow[] =>
  Array.from({ length: n }, () => {
    const i = serial++;
    return {
      key: `count-job-${i}`,
      providedTags: i % 3 ? [`task:source-package:p${i % 11}`] : ['lane:fast'],
      requiredTags: CLASSES[i % CLASSES.length],
      priorityBase: i % 4,
      priorityAdjustment: 0,
      createdAtSeconds: i % 17,
    };
  });

const REQUEST_WORK = `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;
const RELEASE = `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "test" }) { __typename ... on Error { code message } } }`;
const COMPLETE = `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ... on Error { code message } } }`;
const ABORT = `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ... on Error { code message } } }`;

/** The kept counts, summed as the readers sum them, against a count(*) of the queue. */
async function expectExact(label: string): Promise<void> {
  const kept = await t.sql<{ class_id: number | null; n: number }>(
    `select class_id, sum(n)::int as n from class_pending_count group by class_id having sum(n) <> 0 order by class_id nulls first`,
  );
  const counted = await t.sql<{ class_id: number | null; n: number }>(
    `select class_id, count(*)::int as n from work_request where status = 'PENDING' group by class_id order by class_id nulls first`,
  );
  expect(kept, label).toEqual(counted);
  const read = await pendingByClass(t.app.orm.em.fork());
  expect(
    [...read].sort((a, b) => (a.class_id ?? -1) - (b.class_id ?? -1)),
    label,
  ).toEqual(counted);
  const stateDiff = await t.sql<{ id: number }>(
    `select w.id from worker w full join worker_state s on s.worker_id = w.id
      where w.id is null or s.worker_id is null
         or (w.shape_version, w.type::text, w.enabled, w.draining, w.shutting_down, w.connected_at, w.metadata_reported_at, w.quarantined_at, w.terminated_at, w.last_completed_at,
              (extract(epoch from w.metadata_reported_at) * 1000)::float8, (extract(epoch from w.last_completed_at) * 1000)::float8)
            is distinct from (s.shape_version, s.type, s.enabled, s.draining, s.shutting_down, s.connected_at, s.metadata_reported_at, s.quarantined_at, s.terminated_at, s.last_completed_at, s.reported_ms, s.last_completed_ms)`,
  );
  expect(stateDiff, `${label}: worker_state rows that differ from their worker`).toEqual([]);
}

describe('counts kept by PostgreSQL', () => {
  it('equal a count(*) of the queue, and worker_state its workers, after a mixed concurrent workload', async () => {
    await resetScheduling(t);
    const seeded = await seedScheduling(t, { workers, requests: batch(200) });
    await expectExact('seeded');
    const token = (workerId: number) => seeded.tokens.get([...seeded.workerIds].find(([, id]) => id === workerId)![0])!;
    const held = (status: string) =>
      t.sql<{ id: number; worker_id: number }>(`select id, worker_id from work_request where status = ? order by id`, [
        status,
      ]);
    const fold = () => compactPendingCounts(t.app.orm.em.fork());
    const create = (n: number) =>
      t.app.orm.em.fork().transactional(async (tx) => {
        await insertPending(t, tx, batch(n));
        await classifyPending(tx);
      });
    const gqlOk = async (query: string, id: number, tok: string | null) => {
      const res = await t.gql(query, { id: String(id) }, tok);
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    };

    for (let round = 0; round < 4; round++) {
      // Pulls of every worker, a pass, creations and folds, all at once.
      await Promise.all([
        ...workers.map((w) => t.gql(REQUEST_WORK, {}, seeded.tokens.get(w.name)!)),
        t.app.scheduler.runPass(),
        create(30),
        create(1),
        fold(),
        fold(),
      ]);
      await expectExact(`round ${round}: pulls, a pass, creations`);

      // Releases, completions and aborts of what is held, with more pulls, creations and folds among them.
      const assigned = await held('ASSIGNED');
      const pending = await held('PENDING');
      await Promise.all([
        ...assigned.map((a, i) =>
          i % 3 === 0
            ? gqlOk(RELEASE, a.id, token(a.worker_id))
            : i % 3 === 1
              ? gqlOk(COMPLETE, a.id, token(a.worker_id))
              : gqlOk(ABORT, a.id, t.adminToken),
        ),
        ...pending.slice(0, 5).map((p) => gqlOk(ABORT, p.id, t.adminToken)),
        ...workers.slice(0, 8).map((w) => t.gql(REQUEST_WORK, {}, seeded.tokens.get(w.name)!)),
        create(10),
        fold(),
      ]);
      await expectExact(`round ${round}: releases, completions, aborts`);

      // Lease expiry: assignments nobody acknowledged go back to the queue (or are aborted after their retries).
      await Promise.all([t.gql(REQUEST_WORK, {}, seeded.tokens.get(workers[0].name)!), create(3)]);
      await t.app.scheduler.sweepLeases(new Date(Date.now() + 24 * 3600_000));
      await expectExact(`round ${round}: lease expiry`);
    }

    // A worker comes to require lane:fast: the pending requests providing it move to new classes.
    await Promise.all([
      t.app.orm.em.fork().transactional((tx) => registerSignificantTags(tx, ['lane:fast'])),
      create(5),
      fold(),
    ]);
    await expectExact('re-classification');

    // A change rolled back leaves the counts as they were; deletions count down.
    const rolledBack = t.app.orm.em.fork();
    await rolledBack.begin();
    await rolledBack.execute(`update work_request set status = 'ABORTED' where status = 'PENDING'`);
    await rolledBack.rollback();
    await t.sql(
      `delete from work_request where id in (select id from work_request where status = 'PENDING' order by id limit 7)`,
    );
    await expectExact('rollback and deletions');

    // Worker changes: drained, disconnected, quarantined, terminated, removed.
    const ids = [...seeded.workerIds.values()];
    await t.sql(`update worker set draining = true where id = ?`, [ids[0]]);
    await t.sql(`update worker set connected_at = null where id = ?`, [ids[1]]);
    await t.sql(`update worker set quarantined_at = now(), quarantine_reason = 'test' where id = ?`, [ids[2]]);
    await t.sql(`update worker set terminated_at = now() where id = ?`, [ids[3]]);
    await t.sql(`update worker set last_seen_at = now()`); // a heartbeat: no state column moves
    await t.sql(`delete from token where worker_id = ?`, [ids[4]]);
    await t.sql(`update work_request set worker_id = null where worker_id = ?`, [ids[4]]);
    await t.sql(`delete from worker where id = ?`, [ids[4]]);
    await expectExact('worker changes');

    await fold();
    const [{ rows }] = await t.sql<{ rows: number }>(`select count(*)::int as rows from class_pending_count`);
    const [{ classes }] = await t.sql<{ classes: number }>(
      `select count(distinct class_id)::int as classes from work_request where status = 'PENDING'`,
    );
    expect(rows).toBeLessThanOrEqual(classes + 1); // one row per class once folded (and one for requests without a class)
    await expectExact('folded');
    await resetScheduling(t);
    await expectExact('emptied');
  }, 120_000);
});
