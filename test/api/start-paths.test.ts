import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, ok, sbuild } from '../helpers/fixtures.js';

// A worker's start of its own ASSIGNED request is one statement; a repeated acknowledgement, another
// worker's request and a request that is no longer ASSIGNED take the locked path. Both write the start
// with the same statement (START_SQL): these tests look at the rows each leaves.
const t = useTestApp();

const START = `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { id status } ... on Error { code } } }`;

let worker: string;
let other: string;

async function create(): Promise<number> {
  const d = await ok(
    t,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { id } ... on Error { code message } } }`,
    {
      i: sbuild('debian/main', 'hello'),
    },
  );
  return Number((d.createWorkRequest as { id: string }).id);
}

/** Assigns a pending request to the named worker (as a pass would). */
async function assignTo(id: number, name: string): Promise<void> {
  const rows = await t.sql(
    `update work_request set status = 'ASSIGNED', worker_id = (select id from worker where name = ?), assigned_at = now() where id = ? and status = 'PENDING' returning id`,
    [name, id],
  );
  expect(rows).toHaveLength(1);
}

const start = async (id: number, token: string) =>
  (await ok(t, START, { id: String(id) }, token)).startWorkRequest as Record<string, unknown>;

const row = async (id: number) =>
  (
    await t.sql<{ status: string; worker: string | null; started_at: Date | null; assigned: boolean }>(
      `select r.status, w.name as worker, r.started_at, r.assigned_at is not null as assigned from work_request r left join worker w on w.id = r.worker_id where r.id = ?`,
      [id],
    )
  )[0];

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  worker = await connectedWorker(t, 'start-1');
  other = await connectedWorker(t, 'start-2');
});

describe('starting work: the one-statement path and the locked path leave the same rows', () => {
  it('a start is RUNNING on the same worker with its start time; a repeated one changes nothing', async () => {
    const id = await create();
    await assignTo(id, 'start-1');
    expect(await start(id, worker)).toEqual({ __typename: 'WorkRequest', id: String(id), status: 'RUNNING' });
    const first = await row(id);
    expect(first).toMatchObject({ status: 'RUNNING', worker: 'start-1', assigned: true });
    expect(first.started_at).not.toBeNull();
    // The locked path answers the repetition: the same row, the first start time kept.
    expect(await start(id, worker)).toEqual({ __typename: 'WorkRequest', id: String(id), status: 'RUNNING' });
    expect(await row(id)).toEqual(first);
  });

  it('another worker is told there is no such request, and a request no longer ASSIGNED is refused: the rows are untouched', async () => {
    const id = await create();
    await assignTo(id, 'start-1');
    const before = await row(id);
    expect(await start(id, other)).toMatchObject({ __typename: 'NotFoundError' });
    expect(await row(id)).toEqual(before);
    await t.sql(`update work_request set status = 'PENDING', worker_id = null, assigned_at = null where id = ?`, [id]);
    await assignTo(id, 'start-1');
    await t.sql(`update work_request set status = 'ABORTED' where id = ?`, [id]);
    const aborted = await row(id);
    expect((await start(id, worker)).__typename).not.toBe('WorkRequest');
    expect(await row(id)).toEqual(aborted);
  });
});
