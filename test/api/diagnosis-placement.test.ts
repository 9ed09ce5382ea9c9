/**
 * The diagnosis names every placement rule when it decides (docs/design.md: placement quality): which free worker a pending
 * request would go to and the rule that put it first, whether it is heavy work and why, and where it
 * stands in the queue of its class, split by the rule that puts the others ahead. Through GraphQL on
 * the real database, and checked against what a pass then does.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createPool, createWorkspace, ERROR_FIELDS, ok, submitOk } from '../helpers/fixtures.js';
import { resetScheduling } from '../helpers/scheduler-fixtures.js';

const t = useTestApp();

const GIB = 1024 ** 3;
const meta = (cpuCount: number, memoryGib: number) => ({
  architectures: ['amd64'],
  cpuCount,
  totalPhysicalMemory: memoryGib * GIB,
  diskFree: 100 * GIB,
  tasks: [{ type: 'worker', name: 'noop', version: 1 }],
});
const machine = (
  name: string,
  cpuCount: number,
  memoryGib: number,
  opts: { pool?: string; concurrency?: number } = {},
) => connectedWorker(t, name, opts, meta(cpuCount, memoryGib));

const noop = (workspace: string, extra: Record<string, unknown> = {}) => ({
  workspace,
  taskType: 'worker',
  taskName: 'noop',
  taskData: {},
  ...extra,
});

const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { diagnosis { state
  placement { heavy heavyReason averageSeconds thresholdSeconds rules preferredWorkers decidedBy }
  queue { ahead aheadBy { rule count } } } } }`;
const diagnosisOf = async (id: string, token?: string | null) =>
  (await ok(t, DIAGNOSIS, { id }, token)).workRequest.diagnosis;

/** Who holds the request after a pass. */
async function passAndHolder(id: string): Promise<string | null> {
  await t.app.scheduler.runPass();
  const [row] = await t.sql<{ name: string | null }>(
    `select w.name from work_request r left join worker w on w.id = r.worker_id where r.id = ?`,
    [Number(id)],
  );
  return row.name;
}

beforeAll(async () => {
  await createWorkspace(t, 'place/main');
  await createWorkspace(t, 'place/other');
});

beforeEach(async () => {
  await resetScheduling(t);
  t.app.scheduler.history.forget();
});

describe('diagnosis: the free worker a request would go to, and the rule that decided', () => {
  it('light work: the smallest first; with a long history the same task is heavy work and goes to the largest', async () => {
    await machine('dp-large', 32, 64);
    await machine('dp-small', 4, 8);
    const id = (await submitOk(t, noop('place/main'))).id as string;
    expect(await diagnosisOf(id)).toEqual({
      state: 'READY',
      placement: {
        heavy: false,
        heavyReason: null,
        averageSeconds: null,
        thresholdSeconds: 3600,
        rules: ['STATIC_BEFORE_POOL', 'SMALLEST_FOR_LIGHT', 'MOST_SPECIALISED', 'OLDEST'],
        preferredWorkers: ['dp-small', 'dp-large'],
        decidedBy: 'SMALLEST_FOR_LIGHT',
      },
      queue: {
        ahead: 0,
        aheadBy: [
          { rule: 'HIGHER_PRIORITY', count: 0 },
          { rule: 'FAIR_SHARE', count: 0 },
          { rule: 'AGE', count: 0 },
        ],
      },
    });
    await t.sql(
      `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'noop', current_date, 4, 4 * 5400)`,
    );
    t.app.scheduler.history.forget();
    expect((await diagnosisOf(id)).placement).toEqual({
      heavy: true,
      heavyReason: 'HISTORY',
      averageSeconds: 5400,
      thresholdSeconds: 3600,
      rules: ['STATIC_BEFORE_POOL', 'FASTEST_FOR_HEAVY', 'LARGEST_FOR_HEAVY', 'MOST_SPECIALISED', 'OLDEST'],
      preferredWorkers: ['dp-large', 'dp-small'],
      decidedBy: 'LARGEST_FOR_HEAVY',
    });
    // What the diagnosis says is what the pass does.
    expect(await passAndHolder(id)).toBe('dp-large');
  });

  it('a size class makes it heavy work (REQUIRES_LARGE) before any history; static before pool decides among equals', async () => {
    await createPool(t, { name: 'dp-pool' });
    await machine('dp-pooled', 8, 16, { pool: 'dp-pool' }); // registered first: the oldest
    await machine('dp-static', 8, 16);
    const light = (await submitOk(t, noop('place/main'))).id as string;
    expect((await diagnosisOf(light)).placement).toMatchObject({
      heavy: false,
      preferredWorkers: ['dp-static', 'dp-pooled'],
      decidedBy: 'STATIC_BEFORE_POOL',
    });
    await t.sql(`update worker set provided_tags = provided_tags || '{worker:class:large}'`);
    await t.sql(
      `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'noop', current_date, 1, 7200)`,
    );
    t.app.scheduler.history.forget(); // the process read the averages a moment ago, for the first diagnosis
    const heavy = (await submitOk(t, noop('place/main', { requiredTags: ['worker:class:large'] }))).id as string;
    expect((await diagnosisOf(heavy)).placement).toMatchObject({
      heavy: true,
      heavyReason: 'REQUIRES_LARGE',
      averageSeconds: 7200,
      decidedBy: 'STATIC_BEFORE_POOL',
    });
    // Anyone who may see the request sees the names (public, as worker names are) and the rules.
    expect((await diagnosisOf(light, null)).placement.preferredWorkers).toEqual(['dp-static', 'dp-pooled']);
  });

  it('with the workers busy there is no worker to name; a request that is not PENDING has no placement and no queue position', async () => {
    const token = await machine('dp-only', 4, 8);
    const first = (await submitOk(t, noop('place/main'))).id as string;
    const got = await ok(
      t,
      `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } } }`,
      {},
      token,
    );
    expect(got.requestWork.workRequest.id).toBe(first);
    const second = (await submitOk(t, noop('place/main'))).id as string;
    expect(await diagnosisOf(second)).toMatchObject({
      state: 'WAITING_FOR_CAPACITY',
      placement: { preferredWorkers: [], decidedBy: null },
      queue: { ahead: 0 },
    });
    expect(await diagnosisOf(first)).toMatchObject({ state: 'NOT_PENDING', placement: null, queue: null });
  });
});

describe('diagnosis: where a waiting request stands in the queue, and why the others are ahead', () => {
  it('two workspaces: ahead by a higher priority, by fair share (submitted later, from the other workspace) and by age', async () => {
    const token = await machine('dp-busy', 4, 8);
    const busy = (await submitOk(t, noop('place/main'))).id as string;
    await ok(t, `mutation { requestWork { __typename } }`, {}, token);
    expect((await diagnosisOf(busy)).state).toBe('NOT_PENDING');
    // Workspace A queues a backlog of five in one call; workspace B submits one later; then A one of a higher priority.
    const started = Date.now();
    const created = await ok(
      t,
      `mutation($i: CreateWorkRequestsInput!) { createWorkRequests(input: $i) { ... on CreateWorkRequestsPayload { requests { id } } ${ERROR_FIELDS} } }`,
      { i: { requests: Array.from({ length: 5 }, () => noop('place/main')) } },
    );
    const backlog = created.createWorkRequests.requests.map((r: { id: string }) => r.id as string);
    const fromB = (await submitOk(t, noop('place/other'))).id as string;
    const urgent = (await submitOk(t, noop('place/main', { priorityBase: 1 }))).id as string;
    // A's keys are a second apart from its submission on; B's key falls before A's last ones when B submits within a few seconds.
    expect(Date.now() - started).toBeLessThan(3000);
    const last = backlog[4];
    expect((await diagnosisOf(last)).queue).toEqual({
      ahead: 6,
      aheadBy: [
        { rule: 'HIGHER_PRIORITY', count: 1 },
        { rule: 'FAIR_SHARE', count: 1 },
        { rule: 'AGE', count: 4 },
      ],
    });
    // B's request: the urgent one by priority and A's first by age; none of A's backlog after that is ahead of it.
    expect((await diagnosisOf(fromB)).queue).toEqual({
      ahead: 2,
      aheadBy: [
        { rule: 'HIGHER_PRIORITY', count: 1 },
        { rule: 'FAIR_SHARE', count: 0 },
        { rule: 'AGE', count: 1 },
      ],
    });
    expect((await diagnosisOf(urgent)).queue.ahead).toBe(0);
    // The queue serves them in that order: urgent, A's first, B's, then the rest of A's.
    const served: string[] = [];
    for (let i = 0; i < 4; i++) {
      await t.sql(`update work_request set status = 'COMPLETED' where status = 'ASSIGNED'`);
      const got = await ok(
        t,
        `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } } }`,
        {},
        token,
      );
      served.push(got.requestWork.workRequest.id as string);
    }
    expect(served).toEqual([urgent, backlog[0], fromB, backlog[1]]);
  });
});
