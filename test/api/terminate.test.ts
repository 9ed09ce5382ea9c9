/**
 * terminateWorker (docs/design.md: pools and instances): a terminated pool worker is INACTIVE at once: hidden, no capacity, no
 * new work, its tokens refused; work it had not started goes back to PENDING untouched, running work
 * is re-queued as a retry (or ABORTED past the maximum); the changes are published after the commit.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  createPool,
  createUser,
  createWorkspace,
  ERROR_FIELDS,
  expectResult,
  ok,
  registerWorker,
  reportMetadata,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp({ leases: { maxRetries: 3 } });

const TERMINATE = `mutation($n: String!) { terminateWorker(input: { name: $n }) { __typename ... on Worker { name status terminatedAt } ${ERROR_FIELDS} } }`;
const noop = { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} };
const NOOP_METADATA = { architectures: ['amd64'], tasks: [{ type: 'worker', name: 'noop', version: 1 }] };

async function pull(token: string): Promise<string> {
  const r = await ok(t, `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`, {}, token);
  return r.requestWork.workRequest.id as string;
}

const request = async (id: string) =>
  (
    await t.sql<{ status: string; retry_count: number; status_reason: string | null; worker_id: number | null }>(
      `select status, retry_count, status_reason, worker_id from work_request where id = ?`,
      [Number(id)],
    )
  )[0];

describe('terminateWorker', () => {
  it('makes a pool worker INACTIVE at once, gives back what it held, refuses its token, and publishes it all', async () => {
    await createWorkspace(t, 'debian/main');
    await createPool(t, { name: 'term' });
    const token = await registerWorker(t, 'term-1', { pool: 'term', concurrency: 2 });
    await reportMetadata(t, token, NOOP_METADATA);
    const assigned = (await submitOk(t, noop)).id as string;
    const running = (await submitOk(t, noop)).id as string;
    expect([await pull(token), await pull(token)].sort()).toEqual([assigned, running].sort());
    await ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id: running }, token);

    const workerEvents = t.app.events.subscribe('workerChanged')[Symbol.asyncIterator]();
    const requestEvents = t.app.events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
    const firstWorker = workerEvents.next();
    const firstRequests = [requestEvents.next()];
    await t.app.events.listening?.();

    const r = await expectResult(t, 'Worker', TERMINATE, { n: 'term-1' });
    expect(r.status).toBe('INACTIVE');
    expect(r.terminatedAt).not.toBeNull();

    // Events after the commit: the worker, and both requests (an event of the start above may still
    // arrive first: the requests' events are read until both are seen, five at most).
    expect((await firstWorker).value).toMatchObject({ name: 'term-1' });
    const changed = new Set<string>([String((await firstRequests[0]).value.id)]);
    for (let i = 0; i < 4 && !(changed.has(assigned) && changed.has(running)); i++)
      changed.add(String((await requestEvents.next()).value.id));
    expect([...changed].filter((id) => id === assigned || id === running).sort()).toEqual([assigned, running].sort());
    await workerEvents.return?.();
    await requestEvents.return?.();

    // Not started: back at once, no retry counted. Running: re-queued as a retry.
    expect(await request(assigned)).toEqual({
      status: 'PENDING',
      retry_count: 0,
      worker_id: null,
      status_reason: 'worker term-1 was terminated (by an admin); back to the queue, not started',
    });
    expect(await request(running)).toEqual({
      status: 'PENDING',
      retry_count: 1,
      worker_id: null,
      status_reason: 'worker term-1 was terminated (by an admin); re-queued (retry 1 of 3)',
    });

    // Its token stops working.
    const refused = await t.gql(`mutation { heartbeat(input: {}) { __typename } }`, {}, token);
    expect(refused.status).toBe(401);

    // Hidden from the default list, INACTIVE with includeInactive; no capacity for demand or diagnosis.
    const list = await ok(
      t,
      `{ all: workers { edges { node { name } } } inactive: workers(filter: { includeInactive: true }) { edges { node { name status } } } }`,
    );
    expect(list.all.edges.map((e: { node: { name: string } }) => e.node.name)).not.toContain('term-1');
    expect(list.inactive.edges.map((e: { node: { name: string; status: string } }) => e.node)).toContainEqual({
      name: 'term-1',
      status: 'INACTIVE',
    });
    const { workRequest } = await ok(
      t,
      `query($id: ID!) { workRequest(id: $id) { candidateWorkers(availableOnly: false) { name } diagnosis { state matchingWorkers } } }`,
      {
        id: assigned,
      },
    );
    expect(workRequest).toEqual({
      candidateWorkers: [],
      diagnosis: { state: 'WAITING_FOR_PROVISIONING', matchingWorkers: 0 },
    });

    // A second terminate answers the worker as it is.
    expect(await expectResult(t, 'Worker', TERMINATE, { n: 'term-1' })).toMatchObject({
      status: 'INACTIVE',
      terminatedAt: r.terminatedAt,
    });
  });

  it('ABORTS running work past the maximum of retries, with the reason', async () => {
    await createPool(t, { name: 'term-max' });
    const token = await registerWorker(t, 'term-max-1', { pool: 'term-max' });
    await reportMetadata(t, token, NOOP_METADATA);
    await t.sql(`update work_request set status = 'ABORTED' where status = 'PENDING'`); // the first test's requests
    const id = (await submitOk(t, noop)).id as string;
    expect(await pull(token)).toBe(id);
    await ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);
    await t.sql(`update work_request set retry_count = 3 where id = ?`, [Number(id)]);
    await expectResult(t, 'Worker', TERMINATE, { n: 'term-max-1' });
    expect(await request(id)).toMatchObject({
      status: 'ABORTED',
      retry_count: 4,
      status_reason: 'worker term-max-1 was terminated (by an admin) (retry 4 of 3): aborted',
    });
  });

  it.each([
    ['a static worker', 'term-static', 'INVALID_STATE'],
    ['an unknown worker', 'nobody', 'NOT_FOUND'],
  ])('refuses %s and changes nothing', async (_label, name, code) => {
    if (name === 'term-static') await registerWorker(t, name);
    const r = await ok(t, TERMINATE, { n: name });
    expect(r.terminateWorker.code).toBe(code);
    expect(await t.sql(`select name from worker where terminated_at is not null and name = ?`, [name])).toEqual([]);
  });

  it('is for admins only', async () => {
    await createPool(t, { name: 'term-auth' });
    const workerToken = await registerWorker(t, 'term-auth-1', { pool: 'term-auth' });
    const user = await createUser(t, 'term-user');
    expect((await ok(t, TERMINATE, { n: 'term-auth-1' }, user)).terminateWorker.code).toBe('FORBIDDEN');
    expect((await ok(t, TERMINATE, { n: 'term-auth-1' }, workerToken)).terminateWorker.code).toBe('FORBIDDEN');
    expect((await ok(t, TERMINATE, { n: 'term-auth-1' }, null)).terminateWorker.code).toBe('UNAUTHENTICATED');
    expect(await t.sql(`select terminated_at from worker where name = 'term-auth-1'`)).toEqual([
      { terminated_at: null },
    ]);
  });
});
