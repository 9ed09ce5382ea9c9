import { beforeAll, describe, expect, it } from 'vitest';
import { changeMayAllowAssignments } from '../../src/scheduler/scheduler.js';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, ok, sbuild } from '../helpers/fixtures.js';

// The scheduler runs by itself here, with a debounce long enough that a test can act before a pass.
const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 300, passIntervalMs: 3_600_000 } });

const settle = () => new Promise((r) => setTimeout(r, 600)); // past the debounce and the pass it starts
/** Full passes this process ran: a pass runs in full only when work is pending (a request no worker runs waits here). */
async function passes(): Promise<number> {
  const metric = await t.app.metrics.registry.getSingleMetric('tagsched_scheduler_passes_total')!.get();
  return metric.values.reduce((sum, v) => sum + v.value, 0);
}
const create = async (arch: string, token?: string) =>
  (
    await ok(
      t,
      `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { id status } } }`,
      { i: sbuild('debian/main', 'hello', { taskData: { source_package: 'hello', host_architecture: arch } }) },
      token,
    )
  ).createWorkRequest as { id: string; status: string };
const start = (id: string, token: string) =>
  ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);

let worker: string;

beforeAll(async () => {
  t.app.scheduler.start(); // listens to the events (app.start() would, with the HTTP server this file does not need); app.stop() stops it
  await createWorkspace(t, 'debian/main');
  await create('sparc64'); // waits for ever: every pass finds pending work, and counts
  worker = await connectedWorker(t, 'trigger-amd64');
  await settle();
});

describe('which request changes ask for a scheduling pass', () => {
  it('by status: new pending work and freed slots do; assignments, starts and blocked requests do not', () => {
    expect(
      (['PENDING', 'COMPLETED', 'ABORTED', undefined] as const).map((status) => changeMayAllowAssignments({ status })),
    ).toEqual([true, true, true, true]);
    expect(
      (['ASSIGNED', 'RUNNING', 'BLOCKED'] as const).map((status) => changeMayAllowAssignments({ status })),
    ).toEqual([false, false, false]);
    expect(changeMayAllowAssignments({ status: 'COMPLETED', slotRefilled: true })).toBe(false);
  });

  it('a request placed at once, its start and its completion by its worker run no pass; a request left pending does', async () => {
    const before = await passes();
    const placed = await create('amd64');
    expect(placed.status).toBe('ASSIGNED');
    await settle();
    expect(await passes()).toBe(before);
    await start(placed.id, worker);
    await settle();
    expect(await passes()).toBe(before);
    // The worker is busy: this one waits, and its change asks for a pass.
    const waiting = await create('amd64');
    expect(waiting.status).toBe('PENDING');
    await settle();
    expect(await passes()).toBe(before + 1);
    // The completion frees the slot, and the worker gets its next work at once, without a pass.
    await ok(
      t,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id: placed.id },
      worker,
    );
    await settle();
    expect(await passes()).toBe(before + 1);
    const [row] = await t.sql<{ status: string }>('select status from work_request where id = ?', [Number(waiting.id)]);
    expect(row.status).toBe('ASSIGNED');
    await start(waiting.id, worker);
    await ok(
      t,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id: waiting.id },
      worker,
    );
    await settle();
    expect(await passes()).toBe(before + 1);
    // Completed by an admin, a request frees its worker's slot for a pass to fill.
    const third = await create('amd64');
    expect(third.status).toBe('ASSIGNED');
    await ok(t, `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`, {
      id: third.id,
    });
    await settle();
    expect(await passes()).toBe(before + 2);
  });

  it('a pull publishes its assignment only as ASSIGNED, which asks for no pass', async () => {
    const changes = t.app.events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
    const first = changes.next(); // subscribes
    await t.app.events.listening?.();
    // Created in a batch (no placement): the worker pulls it before the debounced pass runs.
    const created = await ok(
      t,
      `mutation($i: CreateWorkRequestsInput!) { createWorkRequests(input: $i) { ... on CreateWorkRequestsPayload { requests { id } } } }`,
      {
        i: { requests: [sbuild('debian/main')] },
      },
    );
    const id = Number(created.createWorkRequests.requests[0].id);
    const pulled = await ok(
      t,
      `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`,
      {},
      worker,
    );
    expect(Number(pulled.requestWork.workRequest.id)).toBe(id);
    // A marker after the pull: every change of the request published before it has been heard.
    const marker = await create('sparc64');
    const heard: { id: number; status?: string }[] = [];
    for (let next = await first; ; next = await changes.next()) {
      heard.push({ id: next.value.id, status: next.value.status });
      if (next.value.id === Number(marker.id)) break;
    }
    await changes.return?.();
    expect(heard.filter((h) => h.id === id)).toEqual([
      { id, status: 'PENDING' },
      { id, status: 'ASSIGNED' },
    ]);
    await settle();
  });
});
