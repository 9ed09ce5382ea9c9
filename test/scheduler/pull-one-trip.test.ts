/**
 * A worker's pull in one round trip (scheduler/storage/next-work.ts, assignNextWorkInOneTrip): once the
 * process knows the worker's shape, the pull assigns in one trip, under the same rules as the pull's
 * transaction, and hands back to it whenever it cannot decide (an unknown or changed shape, a class
 * newer than the cache). On the real database, with the scheduler manual so that only these pulls assign.
 */
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { assignNextWork, assignNextWorkInOneTrip, PullShapes } from '../../src/scheduler/storage/next-work.js';
import { useTestApp } from '../helpers/app.js';
import {
  AMD64_METADATA,
  connectedWorker,
  createWorkspace,
  reportMetadata,
  sbuild,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp();
let workerId: number;
let workerToken: string;

/** As the scheduler's requestWork does it: in one trip when the worker's shape is known (undefined when not, or when the trip cannot decide). */
const oneTrip = async (shapes: PullShapes, options: { skipLocked?: boolean } = {}) => {
  const shape = shapes.get(workerId);
  return shape
    ? assignNextWorkInOneTrip(
        t.app.orm.em.fork(),
        t.app.scheduler.classes,
        t.app.config.workers,
        workerId,
        shape,
        new Date(),
        options,
      )
    : undefined;
};
const inTransaction = (shapes: PullShapes) =>
  t.app.orm.em
    .fork()
    .transactional((tx) =>
      assignNextWork(tx, t.app.scheduler.classes, t.app.config.workers, workerId, new Date(), { shapes }),
    );
const held = async () =>
  (
    await t.sql<{ id: number }>(
      `select id from work_request where worker_id = ? and status in ('ASSIGNED', 'RUNNING') order by id`,
      [workerId],
    )
  ).map((r) => r.id);
const complete = (ids: readonly number[]) =>
  t.sql(`update work_request set status = 'COMPLETED', completed_at = now() where id = any(?::int[])`, [
    `{${ids.join(',')}}`,
  ]);

beforeAll(async () => {
  await createWorkspace(t, 'debian/trip');
  workerToken = await connectedWorker(t, 'trip-amd64', { concurrency: 2 });
  [{ id: workerId }] = await t.sql<{ id: number }>(`select id from worker where name = 'trip-amd64'`);
});

describe('a pull in one round trip', () => {
  it('hands an unknown worker to the transaction, which learns its shape; then assigns in one trip, up to the worker concurrency', async () => {
    const shapes = new PullShapes();
    const first = Number((await submitOk(t, sbuild('debian/trip', 'one'))).id);
    const second = Number((await submitOk(t, sbuild('debian/trip', 'two'))).id);
    const third = Number((await submitOk(t, sbuild('debian/trip', 'three'))).id);
    expect(await oneTrip(shapes)).toBeUndefined(); // not known yet: nothing assigned
    expect(await held()).toEqual([]);
    expect((await inTransaction(shapes))?.workRequestId).toBe(first);
    expect(shapes.get(workerId)).toMatchObject({ type: 'worker' });
    const assigned = await oneTrip(shapes);
    expect(assigned).toMatchObject({
      workRequestId: second,
      workerId,
      row: { id: second, status: 'ASSIGNED', worker_id: workerId },
    });
    expect(await oneTrip(shapes)).toBeNull(); // its two slots are held
    expect(await held()).toEqual([first, second]);
    await complete([first, second]);
    expect((await oneTrip(shapes))?.workRequestId).toBe(third);
    await complete([third]);
    expect(await oneTrip(shapes)).toBeNull(); // nothing pending
  });

  it('concurrent pulls of one worker never exceed its concurrency', async () => {
    const shapes = new PullShapes();
    await inTransaction(shapes); // learns the shape (nothing pending)
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push(Number((await submitOk(t, sbuild('debian/trip', `many-${i}`))).id));
    const results = await Promise.all(Array.from({ length: 6 }, () => oneTrip(shapes)));
    const got = results.filter((r) => r).map((r) => r!.workRequestId);
    expect(got).toHaveLength(2);
    expect(await held()).toEqual(got.sort((a, b) => a - b));
    await complete(ids);
  });

  it('hands back to the transaction when the worker shape changed', async () => {
    const shapes = new PullShapes();
    await inTransaction(shapes);
    const before = shapes.get(workerId)!.version;
    await reportMetadata(t, workerToken, { ...AMD64_METADATA, tools: ['sbuild', 'autopkgtest'] });
    const id = Number((await submitOk(t, sbuild('debian/trip', 'retagged'))).id);
    expect(await oneTrip(shapes)).toBeUndefined();
    expect(await held()).toEqual([]);
    expect((await inTransaction(shapes))?.workRequestId).toBe(id);
    expect(shapes.get(workerId)!.version).not.toBe(before);
    await complete([id]);
  });

  it('with SKIP LOCKED, passes over a worker locked by another transaction, and assigns nothing', async () => {
    const shapes = new PullShapes();
    await inTransaction(shapes);
    const id = Number((await submitOk(t, sbuild('debian/trip', 'skipped'))).id);
    // Another session holds the worker's row.
    const holder = new pg.Client({ connectionString: t.dbUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select id from worker where id = $1 for update', [workerId]);
      expect(await oneTrip(shapes, { skipLocked: true })).toBeNull();
      expect(await held()).toEqual([]);
      await holder.query('commit');
    } finally {
      await holder.end();
    }
    expect((await oneTrip(shapes, { skipLocked: true }))?.workRequestId).toBe(id);
    await complete([id]);
  });

  it('refuses to record a call (which waits for the worker) and skip a locked worker at once, before sending anything', async () => {
    const seen = { set: 'last_seen_at = now()', params: [] };
    const shape = { version: '0', type: 'worker', providedTags: [], requiredTags: [] };
    await expect(
      assignNextWorkInOneTrip(
        t.app.orm.em.fork(),
        t.app.scheduler.classes,
        t.app.config.workers,
        workerId,
        shape,
        new Date(),
        { seen, skipLocked: true },
      ),
    ).rejects.toThrow(/cannot skip/);
    await expect(
      t.app.orm.em.fork().transactional((tx) =>
        assignNextWork(tx, t.app.scheduler.classes, t.app.config.workers, workerId, new Date(), {
          seen,
          skipLocked: true,
        }),
      ),
    ).rejects.toThrow(/cannot skip/);
  });

  it('hands back to the transaction when a class is newer than the cache', async () => {
    const shapes = new PullShapes();
    await inTransaction(shapes);
    const id = Number((await submitOk(t, sbuild('debian/trip', 'pending'))).id);
    // A class the process has not loaded (as another process would add it).
    await t.sql(
      `insert into task_class (key, key_hash, required_tags, significant_provided_tags, created_at) values ('worker:type:other|', md5('other') || md5('class'), '{worker:type:other}', '{}', now())`,
    );
    const [{ newest }] = await t.sql<{ newest: number }>(`select max(id)::int as newest from task_class`);
    expect(newest).toBeGreaterThan(t.app.scheduler.classes.latestId);
    expect(await oneTrip(shapes)).toBeUndefined();
    expect((await inTransaction(shapes))?.workRequestId).toBe(id);
    await complete([id]);
  });
});
