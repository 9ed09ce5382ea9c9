/**
 * When a pending work request is expected to start (the diagnosis's startEstimate), through GraphQL on
 * the real database: the requests of its class ahead of it served in order on the matching worker's
 * slot for their task's history (exact here: within 10%), the first estimate kept on the request, its
 * error recorded when it starts and the class's median absolute error returned with the next
 * estimates; and a private request's diagnosis stays out of reach of the anonymous and of outsiders.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  AMD64_METADATA,
  connectedWorker,
  createPool,
  createUser,
  createWorkspace,
  memberOf,
  ok,
  submitOk,
} from '../helpers/fixtures.js';
import { resetScheduling } from '../helpers/scheduler-fixtures.js';
import { markInstanceRunning } from '../../src/services/workers/instance-running.js';

const t = useTestApp();

/** A worker that runs the `noop` task. */
const noopWorker = (name: string) =>
  connectedWorker(
    t,
    name,
    { concurrency: 1 },
    { ...AMD64_METADATA, tasks: [{ type: 'worker', name: 'noop', version: 1 }] },
  );
const noop = (workspace: string) => ({ workspace, taskType: 'worker', taskName: 'noop', taskData: {} });
const ESTIMATE = `query($id: ID!) { workRequest(id: $id) { diagnosis { state queue { ahead }
  startEstimate { at waitSeconds basis extrapolated medianAbsoluteErrorSeconds samples } } } }`;
const estimateOf = async (id: string, token?: string | null) =>
  (await ok(t, ESTIMATE, { id }, token)).workRequest?.diagnosis;
const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } } }`;
const START = `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`;
const COMPLETE = `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`;

/** The worker takes its next request and starts it; returns the request's id and its start. */
async function takeAndStart(worker: string): Promise<{ id: string; startedAt: number }> {
  const got = await ok(t, REQUEST_WORK, {}, worker);
  const id = got.requestWork.workRequest.id as string;
  expect((await ok(t, START, { id }, worker)).startWorkRequest.__typename).toBe('WorkRequest');
  const [row] = await t.sql<{ started_at: Date }>(`select started_at from work_request where id = ?`, [Number(id)]);
  return { id, startedAt: new Date(row.started_at).getTime() };
}

beforeAll(async () => {
  await createWorkspace(t, 'est/main');
  await createWorkspace(t, 'est/secret', { isPublic: false });
});

beforeEach(async () => {
  await resetScheduling(t);
  // Every run of the task took exactly 60 s.
  await t.sql(
    `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'noop', current_date, 10, 600)`,
  );
  t.app.scheduler.history.forget();
});

describe('diagnosis: the start estimate of a pending request', () => {
  it('one worker of concurrency 1 running a 60 s task, 5 pending: the 5th starts after the running one ends and 4 × 60 s', async () => {
    const worker = await noopWorker('est-one');
    await submitOk(t, noop('est/main'));
    const running = await takeAndStart(worker);
    const pending: string[] = [];
    for (let i = 0; i < 5; i++) pending.push((await submitOk(t, noop('est/main'))).id as string);
    const before = Date.now();
    const d = await estimateOf(pending[4]);
    expect(d.state).toBe('WAITING_FOR_CAPACITY');
    expect(d.queue.ahead).toBe(4);
    const expected = running.startedAt + 60_000 + 4 * 60_000;
    const at = new Date(d.startEstimate.at).getTime();
    expect(Math.abs(at - expected)).toBeLessThan(1000);
    // The wait is the rest of the running one (at most 60 s) plus 4 × 60 s: within 10% of it.
    const exactWait = (expected - before) / 1000;
    expect(Math.abs(d.startEstimate.waitSeconds - exactWait)).toBeLessThan(0.1 * exactWait);
    expect(d.startEstimate).toMatchObject({ extrapolated: false, medianAbsoluteErrorSeconds: null, samples: 0 });
    expect(d.startEstimate.basis).toContain('4 requests ahead simulated on 1 slot of 1 available matching worker');
    // The first estimate is kept on the request, and not moved by a later diagnosis.
    const [kept] = await t.sql<{ estimated_start_at: Date }>(
      `select estimated_start_at from work_request where id = ?`,
      [Number(pending[4])],
    );
    expect(new Date(kept.estimated_start_at).getTime()).toBe(at);
    await t.sql(`update work_request set priority_base = 5 where id = ?`, [Number(pending[4])]);
    expect((await estimateOf(pending[4])).queue.ahead).toBe(0);
    const [still] = await t.sql<{ estimated_start_at: Date }>(
      `select estimated_start_at from work_request where id = ?`,
      [Number(pending[4])],
    );
    expect(new Date(still.estimated_start_at).getTime()).toBe(at);
  });

  it('a request estimated then started records its error; the class median absolute error comes with the next estimates', async () => {
    const worker = await noopWorker('est-err');
    await submitOk(t, noop('est/main'));
    const first = await takeAndStart(worker);
    const second = (await submitOk(t, noop('est/main'))).id as string;
    const third = (await submitOk(t, noop('est/main'))).id as string;
    const estimate = await estimateOf(second);
    expect(new Date(estimate.startEstimate.at).getTime()).toBe(first.startedAt + 60_000);
    // The first run ends early: the second starts about a minute before its estimate.
    expect((await ok(t, COMPLETE, { id: first.id }, worker)).completeWorkRequest.__typename).toBe('WorkRequest');
    const started = await takeAndStart(worker);
    expect(started.id).toBe(second);
    const [row] = await t.sql<{ error: number }>(
      `select abs(extract(epoch from (started_at - estimated_start_at)))::float8 as error from work_request where id = ?`,
      [Number(second)],
    );
    expect(row.error).toBeGreaterThan(0);
    const [kept] = await t.sql<{ errors_seconds: number[] }>(`select errors_seconds from class_start_estimate_error`);
    expect(kept.errors_seconds.map(Number)).toEqual([row.error]);
    const next = await estimateOf(third);
    expect(next.startEstimate.samples).toBe(1);
    expect(next.startEstimate.medianAbsoluteErrorSeconds).toBeCloseTo(row.error, 3);
    // Released by its worker, it is pending afresh: its kept estimate is gone, and its next diagnosis keeps a new one.
    const RELEASE = `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "shutting down" }) { __typename } }`;
    expect((await ok(t, RELEASE, { id: second }, worker)).releaseWorkRequest.__typename).toBe('WorkRequest');
    const keptOf = async () =>
      (
        await t.sql<{ at: Date | null }>(`select estimated_start_at as at from work_request where id = ?`, [
          Number(second),
        ])
      )[0].at;
    expect(await keptOf()).toBeNull();
    const again = await estimateOf(second);
    expect(new Date((await keptOf())!).getTime()).toBe(new Date(again.startEstimate.at).getTime());
  });

  it('a pool measures its launches (launch to its worker’s first connection); a request only it can run waits that long', async () => {
    await createPool(t, { name: 'est-pool', providedTags: ['site:est-pool'], maxActiveInstances: 2 });
    const CREATE_INSTANCE = `mutation($p: String!, $n: String) { createInstance(input: { pool: $p, name: $n }) { __typename } }`;
    for (const [name, seconds] of [
      ['est-pool-1', 100],
      ['est-pool-2', 200],
    ] as const) {
      expect((await ok(t, CREATE_INSTANCE, { p: 'est-pool', n: name })).createInstance.__typename).toBe(
        'InstanceLaunchPayload',
      );
      await t.sql(`update instance set requested_at = now() - make_interval(secs => ?) where name = ?`, [
        seconds,
        name,
      ]);
      const [row] = await t.sql<{ worker_id: number }>(`select worker_id from instance where name = ?`, [name]);
      await markInstanceRunning(t.app.orm.em.fork(), row.worker_id, new Date());
    }
    // 100 s, then 100 + 0.2 × (200 − 100) = 120 s; a second connection of the same worker changes nothing.
    const [first] = await t.sql<{ worker_id: number }>(`select worker_id from instance where name = 'est-pool-1'`);
    await markInstanceRunning(t.app.orm.em.fork(), first.worker_id, new Date());
    const [pool] = await t.sql<{ launch_seconds: number; launch_samples: number }>(
      `select launch_seconds, launch_samples from worker_pool where name = 'est-pool'`,
    );
    expect(pool.launch_samples).toBe(2);
    expect(Number(pool.launch_seconds)).toBeCloseTo(120, 0);
    // Its two workers never connected: only a new instance could run the request, once the pool has room.
    await t.sql(`update worker_pool set max_active_instances = 3 where name = 'est-pool'`);
    const id = (await submitOk(t, { ...noop('est/main'), requiredTags: ['site:est-pool'] })).id as string;
    const d = await estimateOf(id);
    expect(d.startEstimate.waitSeconds).toBeGreaterThan(119);
    expect(d.startEstimate.waitSeconds).toBeLessThanOrEqual(121);
    expect(d.startEstimate.basis).toContain('up to 1 new worker of pool est-pool after a launch of 120 s');
  });

  it('a request nothing can run has no estimate, and says why', async () => {
    await noopWorker('est-amd64');
    const id = (await submitOk(t, { ...noop('est/main'), requiredTags: ['worker:architecture:riscv64'] })).id as string;
    const d = await estimateOf(id);
    expect(d.state).toBe('UNSCHEDULABLE');
    expect(d.startEstimate).toMatchObject({
      at: null,
      waitSeconds: null,
      basis: expect.stringContaining('nothing can ever run it'),
    });
    const [row] = await t.sql<{ estimated_start_at: Date | null }>(
      `select estimated_start_at from work_request where id = ?`,
      [Number(id)],
    );
    expect(row.estimated_start_at).toBeNull();
  });

  it('a request that is not PENDING has no estimate', async () => {
    const worker = await noopWorker('est-np');
    await submitOk(t, noop('est/main'));
    const running = await takeAndStart(worker);
    expect((await estimateOf(running.id)).startEstimate).toBeNull();
  });

  it('the diagnosis of a private request: its members read the estimate, the anonymous and an outsider read nothing', async () => {
    await noopWorker('est-private');
    const member = await memberOf(t, 'est/secret', 'est-member');
    const outsider = await createUser(t, 'est-outsider');
    const id = (await submitOk(t, noop('est/secret'), member)).id as string;
    expect((await estimateOf(id, member)).startEstimate.at).not.toBeNull();
    expect(await estimateOf(id, null)).toBeUndefined();
    expect(await estimateOf(id, outsider)).toBeUndefined();
  });
});
