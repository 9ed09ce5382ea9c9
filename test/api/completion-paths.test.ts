import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, ok, sbuild } from '../helpers/fixtures.js';

// A worker's plain SUCCESS is recorded in one statement; everything that needs more (dependents, a
// workflow parent, a log to compact, a quarantine to lift, a repeated report) takes the transaction.
// Both must leave the same state behind: these tests look at the rows each leaves.
const t = useTestApp({ workers: { quarantineAfterErrors: 2 } });

const COMPLETE = `mutation($id: ID!, $r: WorkRequestResult!, $e: Int) {
  completeWorkRequest(input: { id: $id, result: $r, exitCode: $e }) { __typename ... on WorkRequest { id status result } ... on Error { code message } }
}`;
const START = `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`;

let worker: string;
let other: string;

async function create(extra: Record<string, unknown> = {}): Promise<number> {
  const d = await ok(
    t,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { id } ... on Error { code message } } }`,
    {
      i: sbuild('debian/main', 'hello', extra),
    },
  );
  return Number((d.createWorkRequest as { id: string }).id);
}

/** Assigns a pending request to the named worker (as a pass would; which worker a pass picks is not what these tests are about). */
async function assignTo(id: number, name: string): Promise<void> {
  const rows = await t.sql(
    `update work_request set status = 'ASSIGNED', worker_id = (select id from worker where name = ?), assigned_at = now() where id = ? and status = 'PENDING' returning id`,
    [name, id],
  );
  expect(rows).toHaveLength(1);
}

const complete = async (id: number, token: string, result = 'SUCCESS', exitCode: number | null = 0) =>
  (await ok(t, COMPLETE, { id: String(id), r: result, e: exitCode }, token)).completeWorkRequest as Record<
    string,
    unknown
  >;

const row = async (id: number) =>
  (
    await t.sql<{
      status: string;
      result: string | null;
      exit_code: number | null;
      started: boolean;
      completed: boolean;
    }>(
      `select status, result, exit_code, started_at is not null as started, completed_at is not null as completed from work_request where id = ?`,
      [id],
    )
  )[0];

const durations = () =>
  t.sql<{ task_name: string; runs: number }>(`select task_name, runs from task_duration order by task_name`);

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  worker = await connectedWorker(t, 'paths-1');
  other = await connectedWorker(t, 'paths-2');
});

describe('completing work: the one-statement path and the full path leave the same state', () => {
  it('a plain SUCCESS, started or not: the row, the worker last completion and the task duration', async () => {
    const started = await create();
    await assignTo(started, 'paths-1');
    await ok(t, START, { id: String(started) }, worker);
    expect(await complete(started, worker)).toEqual({
      __typename: 'WorkRequest',
      id: String(started),
      status: 'COMPLETED',
      result: 'SUCCESS',
    });
    expect(await row(started)).toEqual({
      status: 'COMPLETED',
      result: 'SUCCESS',
      exit_code: 0,
      started: true,
      completed: true,
    });

    const unstarted = await create();
    await assignTo(unstarted, 'paths-1');
    await complete(unstarted, worker, 'SUCCESS', null); // completed without a start: started now
    expect(await row(unstarted)).toEqual({
      status: 'COMPLETED',
      result: 'SUCCESS',
      exit_code: null,
      started: true,
      completed: true,
    });

    expect(await durations()).toEqual([{ task_name: 'sbuild', runs: 2 }]);
    const [w] = await t.sql<{ last: boolean }>(
      `select last_completed_at is not null as last from worker where name = 'paths-1'`,
    );
    expect(w.last).toBe(true);
  });

  it('a repeated report is answered as recorded and counted once; another worker is told there is no such request', async () => {
    const id = await create();
    await assignTo(id, 'paths-1');
    const before = (await durations())[0].runs;
    await complete(id, worker);
    expect(await complete(id, worker)).toMatchObject({ __typename: 'WorkRequest', status: 'COMPLETED' });
    expect((await durations())[0].runs).toBe(before + 1);
    const id2 = await create();
    await assignTo(id2, 'paths-1');
    expect(await complete(id2, other)).toMatchObject({ __typename: 'NotFoundError' });
    expect((await row(id2)).status).toBe('ASSIGNED');
    await complete(id2, worker);
  });

  it('a SUCCESS with a BLOCKED dependent releases it', async () => {
    const first = await create();
    const dependent = await create({ dependsOn: [String(first)] });
    expect((await row(dependent)).status).toBe('BLOCKED');
    await assignTo(first, 'paths-1');
    await complete(first, worker);
    expect((await row(first)).status).toBe('COMPLETED');
    expect((await row(dependent)).status).toBe('PENDING');
  });

  it('a SUCCESS of a request with a log of several chunks compacts them', async () => {
    const id = await create();
    await assignTo(id, 'paths-1');
    await ok(t, START, { id: String(id) }, worker);
    const append = `mutation($i: AppendWorkRequestLogInput!) { appendWorkRequestLog(input: $i) { __typename ... on Error { code message } } }`;
    for (const [offset, text] of [
      [0, 'one\n'],
      [4, 'two\n'],
      [8, 'three\n'],
    ] as const) {
      const d = await ok(t, append, { i: { id: String(id), offset, bytes: text.length, text } }, worker);
      expect((d.appendWorkRequestLog as { __typename: string }).__typename).toBe('WorkRequestLogAck');
    }
    expect(
      await t.sql(`select count(*)::int as n from work_request_log_chunk where work_request_id = ?`, [id]),
    ).toEqual([{ n: 3 }]);
    await complete(id, worker);
    expect(
      await t.sql(`select count(*)::int as n from work_request_log_chunk where work_request_id = ?`, [id]),
    ).toEqual([{ n: 1 }]);
    const log = await ok(t, `query($id: ID!) { workRequest(id: $id) { log { text } } }`, { id: String(id) });
    expect((log.workRequest as { log: { text: string } }).log.text).toBe('one\ntwo\nthree\n');
  });

  it("a SUCCESS lifts its worker's quarantine", async () => {
    // Two ERRORs on paths-2 while sbuild succeeds on paths-1 between them: paths-2 is quarantined.
    for (const [name, token, result] of [
      ['paths-2', other, 'ERROR'],
      ['paths-1', worker, 'SUCCESS'],
      ['paths-2', other, 'ERROR'],
    ] as const) {
      const id = await create();
      await assignTo(id, name);
      await complete(id, token, result, result === 'SUCCESS' ? 0 : 1);
    }
    const quarantined = async () =>
      (await t.sql<{ q: boolean }>(`select quarantined_at is not null as q from worker where name = 'paths-2'`))[0].q;
    expect(await quarantined()).toBe(true);
    // Work it still held (assigned before the quarantine) succeeds: the quarantine is lifted.
    const held = await create();
    await assignTo(held, 'paths-2');
    await complete(held, other);
    expect(await quarantined()).toBe(false);
  });
});
