import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, ok, sbuild, submitOk } from '../helpers/fixtures.js';

// The scheduler is manual here (useTestApp's default): only the worker's own pull assigns.
const t = useTestApp();
// Here it runs by itself, so that a new request is placed on a free worker as it is created.
const placing = useTestApp({ scheduler: { automatic: true, passIntervalMs: 3_600_000 } });

const FIELDS =
  'id status statusReason taskName taskData priority assignedAt startedAt createdAt worker { name } workspace { name } createdBy { username }';
const pull = async (token: string) =>
  (
    (await ok(t, `mutation { requestWork { ... on RequestWorkPayload { workRequest { ${FIELDS} } } } }`, {}, token))
      .requestWork as { workRequest: Record<string, unknown> | null }
  ).workRequest;
const seenAt = async (name: string) =>
  Number(
    (
      await t.sql<{ ms: string }>(`select extract(epoch from last_seen_at) * 1000 as ms from worker where name = ?`, [
        name,
      ])
    )[0].ms,
  );
const longAgo = (name: string) =>
  t.sql(`update worker set last_seen_at = now() - interval '1 hour' where name = ?`, [name]);

let worker: string;

beforeAll(async () => {
  await createWorkspace(t, 'debian/pull');
  worker = await connectedWorker(t, 'pull-amd64');
});

describe('requestWork', () => {
  it('counts as the worker heartbeat when nothing is pending', async () => {
    await longAgo('pull-amd64');
    const before = Date.now();
    expect(await pull(worker)).toBeNull();
    expect(await seenAt('pull-amd64')).toBeGreaterThanOrEqual(before - 1_000);
  });

  it('answers the request as it was assigned, the same as a read of it afterwards, and counts as a heartbeat', async () => {
    const created = await submitOk(t, sbuild('debian/pull', 'pulled', { priorityBase: 3 }));
    await longAgo('pull-amd64');
    const before = Date.now();
    const answered = await pull(worker);
    expect(answered).toMatchObject({
      id: created.id,
      status: 'ASSIGNED',
      taskName: 'sbuild',
      priority: 3,
      startedAt: null,
      worker: { name: 'pull-amd64' },
    });
    expect(Date.parse(answered!.assignedAt as string)).toBeGreaterThanOrEqual(before - 1_000);
    const read = (await ok(t, `query($id: ID!) { workRequest(id: $id) { ${FIELDS} } }`, { id: created.id }))
      .workRequest;
    expect(answered).toEqual(read);
    expect(await seenAt('pull-amd64')).toBeGreaterThanOrEqual(before - 1_000);
  });

  it('counts as a heartbeat when the worker has no free slot either', async () => {
    await submitOk(t, sbuild('debian/pull', 'waiting'));
    await longAgo('pull-amd64');
    const before = Date.now();
    expect(await pull(worker)).toBeNull(); // its one slot holds the request above
    expect(await seenAt('pull-amd64')).toBeGreaterThanOrEqual(before - 1_000);
    const [{ pending }] = await t.sql<{ pending: number }>(
      `select count(*)::int as pending from work_request where status = 'PENDING'`,
    );
    expect(pending).toBe(1);
  });
});

describe('createWorkRequest placed at once', () => {
  const create = async (name: string) =>
    (
      await ok(
        placing,
        `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { ${FIELDS} } } }`,
        { i: sbuild('debian/placed', name) },
      )
    ).createWorkRequest as Record<string, unknown>;
  const read = async (id: unknown) =>
    (await ok(placing, `query($id: ID!) { workRequest(id: $id) { ${FIELDS} } }`, { id })).workRequest;

  it('answers the request as its assignment left it, the same as a read of it afterwards', async () => {
    await createWorkspace(placing, 'debian/placed');
    await connectedWorker(placing, 'placed-amd64');
    const before = Date.now();
    const placed = await create('placed');
    expect(placed).toMatchObject({ status: 'ASSIGNED', worker: { name: 'placed-amd64' }, startedAt: null });
    expect(Date.parse(placed.assignedAt as string)).toBeGreaterThanOrEqual(before - 1_000);
    expect(placed).toEqual(await read(placed.id));
    // One worker of concurrency 1: the next one waits, and is answered as written.
    const waiting = await create('waiting');
    expect(waiting).toMatchObject({ status: 'PENDING', worker: null, assignedAt: null });
    expect(waiting).toEqual(await read(waiting.id));
  });
});
