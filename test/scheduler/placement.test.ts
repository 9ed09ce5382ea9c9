/**
 * Placement rules beside the tag match (docs/design.md: workers and placement quality), through GraphQL and the scheduler on the
 * real database: a worker without a fresh metadata report gets no work, and a request a worker
 * released is not offered to that worker again during the release backoff, and a worker whose last
 * results are errors while the same task succeeds elsewhere is quarantined, each shown in the
 * diagnosis and the worker status.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp({ workers: { quarantineAfterErrors: 2 } });

const NOOP_METADATA = { architectures: ['amd64'], tasks: [{ type: 'worker', name: 'noop', version: 1 }] };

const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;
const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { status diagnosis { state availableWorkers unavailableWorkers { reason count } releaseBackoffs { workerName until } } } }`;

/** A worker whose admin gave it static metadata that matches the noop task: its tags match before it ever reports. */
async function register(name: string): Promise<string> {
  const reg = await t.gql(
    `mutation($n: String!, $s: WorkerMetadataInput) { registerWorker(input: { name: $n, staticMetadata: $s }) { ... on WorkerTokenPayload { token } ... on Error { message } } }`,
    {
      n: name,
      s: NOOP_METADATA,
    },
  );
  const token = reg.data!.registerWorker.token as string;
  expect(token, JSON.stringify(reg)).toBeDefined();
  return token;
}

async function report(token: string): Promise<void> {
  const rep = await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: NOOP_METADATA },
    token,
  );
  expect(rep.data!.reportWorkerMetadata.__typename).toBe('Worker');
}

async function pull(token: string): Promise<string | null> {
  const res = await t.gql(REQUEST_WORK, {}, token);
  expect(res.errors).toBeUndefined();
  return res.data!.requestWork.workRequest?.id ?? null;
}

async function noop(workspace: string): Promise<string> {
  const r = await t.gql(
    `mutation($w: String!) { createWorkRequest(input: { workspace: $w, taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } ... on Error { code message } } }`,
    { w: workspace },
  );
  expect(r.data!.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
  return r.data!.createWorkRequest.id as string;
}

const statusOf = async (name: string) =>
  (await t.gql(`query($n: String!) { worker(name: $n) { status } }`, { n: name })).data!.worker.status as string;
const diagnosisOf = async (id: string) => (await t.gql(DIAGNOSIS, { id })).data!.workRequest;

describe('metadata freshness (docs/design.md: workers)', () => {
  it('a connected worker that never reported its metadata gets no work, is STALE, and gets work once it reports', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "fresh/main" }) { __typename } }`);
    const token = await register('fresh-1');
    const id = await noop('fresh/main');
    // Its pull connects it (a heartbeat), but a heartbeat is no report: nothing, from the pull or a pass.
    expect(await pull(token)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    expect(await statusOf('fresh-1')).toBe('STALE');
    expect((await diagnosisOf(id)).diagnosis).toMatchObject({
      state: 'WAITING_FOR_WORKERS',
      availableWorkers: 0,
      unavailableWorkers: [{ reason: 'STALE', count: 1 }],
    });
    await report(token);
    expect(await statusOf('fresh-1')).toBe('IDLE');
    expect(await pull(token)).toBe(id);
  });

  it('a report older than the freshness setting makes it STALE again, heartbeats or not', async () => {
    const token = await register('fresh-2');
    await report(token);
    await t.sql(`update worker set metadata_reported_at = now() - make_interval(secs => ?) where name = 'fresh-2'`, [
      t.app.config.workers.metadataFreshMs / 1000 + 60,
    ]);
    const id = await noop('fresh/main');
    expect(await pull(token)).toBeNull();
    expect(await statusOf('fresh-2')).toBe('STALE');
    await report(token);
    expect(await pull(token)).toBe(id);
  });
});

describe('release backoff (docs/design.md: placement quality)', () => {
  it('a released request is not offered to the worker that released it, by a pull or a pass, while another takes it; diagnosis says so', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "release/main" }) { __typename } }`);
    const a = await register('rel-a');
    await report(a);
    const id = await noop('release/main');
    expect(await pull(a)).toBe(id);
    const released = await t.gql(
      `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "no handler for noop" }) { ... on WorkRequest { status } } }`,
      { id },
      a,
    );
    expect(released.data!.releaseWorkRequest).toEqual({ status: 'PENDING' });
    // The loop the issue found: the same worker asking again at once. It gets nothing now.
    expect(await pull(a)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    const d = await diagnosisOf(id);
    expect(d.diagnosis).toMatchObject({
      state: 'WAITING_FOR_BACKOFF',
      availableWorkers: 0,
      releaseBackoffs: [{ workerName: 'rel-a' }],
    });
    const until = new Date(d.diagnosis.releaseBackoffs[0].until).getTime();
    expect(Math.abs(until - (Date.now() + t.app.config.scheduler.releaseBackoffMs))).toBeLessThan(60_000);
    // Another worker that may run it gets it from a pass.
    const b = await register('rel-b');
    await report(b);
    const passed = await t.app.scheduler.runPass();
    const [{ id: bId }] = await t.sql<{ id: number }>(`select id from worker where name = 'rel-b'`);
    expect(passed.map((x) => [String(x.workRequestId), x.workerId])).toEqual([[id, bId]]);
  });

  it('once the backoff has ended, the worker that released it may get it again', async () => {
    const c = await register('rel-c');
    await report(c);
    await t.sql(`update worker set enabled = false where name in ('rel-a', 'rel-b')`);
    const id = await noop('release/main');
    expect(await pull(c)).toBe(id);
    await t.gql(
      `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "no handler" }) { __typename } }`,
      { id },
      c,
    );
    expect(await pull(c)).toBeNull();
    await t.sql(`update release_backoff set until = now() - interval '1 second' where work_request_id = ?`, [
      Number(id),
    ]);
    expect(await pull(c)).toBe(id);
  });
});

/** The worker pulls a request it must get, starts it and completes it with `result`. */
async function run(token: string, expectedId: string, result: 'SUCCESS' | 'ERROR'): Promise<void> {
  expect(await pull(token)).toBe(expectedId);
  await t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id: expectedId }, token);
  const done = await t.gql(
    `mutation($id: ID!, $r: WorkRequestResult!) { completeWorkRequest(input: { id: $id, result: $r, statusReason: "x" }) { ... on WorkRequest { result } } }`,
    { id: expectedId, r: result },
    token,
  );
  expect(done.data!.completeWorkRequest, JSON.stringify(done)).toEqual({ result });
}

const only = (names: string[]) =>
  t.sql(`update worker set enabled = (name = any(?::text[])) where name like 'q-%'`, [`{${names.join(',')}}`]);
const quarantineOf = async (name: string) =>
  (await t.gql(`query($n: String!) { worker(name: $n) { status quarantineReason } }`, { n: name })).data!.worker as {
    status: string;
    quarantineReason: string | null;
  };

describe('quarantine (docs/design.md: placement quality)', () => {
  let a = '';
  it('is entered after the last N results are ERROR while the task succeeded elsewhere meanwhile, keeps work away, shows why, and an admin lifts it', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "quar/main" }) { __typename } }`);
    a = await register('q-a');
    await report(a);
    const b = await register('q-b');
    await report(b);
    await only(['q-a']);
    await run(a, await noop('quar/main'), 'ERROR');
    await only(['q-b']);
    await run(b, await noop('quar/main'), 'SUCCESS');
    await only(['q-a']);
    await run(a, await noop('quar/main'), 'ERROR');
    const q = await quarantineOf('q-a');
    expect(q.status).toBe('QUARANTINED');
    expect(q.quarantineReason).toMatch(/last 2 results are ERROR \(noop\) while noop succeeded on q-b/);
    // No work for it, by a pull or a pass; the diagnosis counts it as quarantined.
    const id = await noop('quar/main');
    expect(await pull(a)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    expect((await diagnosisOf(id)).diagnosis.unavailableWorkers).toContainEqual({ reason: 'QUARANTINED', count: 1 });
    // Only an admin lifts it by hand.
    const refused = await t.gql(
      `mutation { unquarantineWorker(input: { name: "q-a" }) { __typename ... on Error { code } } }`,
      {},
      a,
    );
    expect(refused.data?.unquarantineWorker ?? refused.errors?.[0]?.extensions?.code).not.toMatchObject({
      __typename: 'Worker',
    });
    expect((await quarantineOf('q-a')).status).toBe('QUARANTINED');
    const lifted = await t.gql(
      `mutation { unquarantineWorker(input: { name: "q-a" }) { ... on Worker { status quarantineReason } } }`,
    );
    expect(lifted.data!.unquarantineWorker).toEqual({ status: 'IDLE', quarantineReason: null });
    expect(await pull(a)).toBe(id);
  });

  it('is lifted by a SUCCESS of the worker itself', async () => {
    await t.sql(`update worker set quarantined_at = now(), quarantine_reason = 'test' where name = 'q-a'`);
    // Work it still held when quarantined, completed with SUCCESS.
    const [{ id }] = await t.sql<{ id: number }>(
      `select id from work_request where worker_id = (select id from worker where name = 'q-a') and status = 'ASSIGNED'`,
    );
    expect((await quarantineOf('q-a')).status).toBe('QUARANTINED');
    const done = await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id: String(id) },
      a,
    );
    expect(done.data!.completeWorkRequest).toEqual({ __typename: 'WorkRequest' });
    expect(await quarantineOf('q-a')).toEqual({ status: 'IDLE', quarantineReason: null });
  });

  it('is not entered when the task fails everywhere (no success elsewhere since the first of the errors)', async () => {
    const c = await register('q-c');
    await report(c);
    await only(['q-c']);
    await run(c, await noop('quar/main'), 'ERROR');
    await run(c, await noop('quar/main'), 'ERROR');
    await run(c, await noop('quar/main'), 'ERROR');
    expect(await quarantineOf('q-c')).toEqual({ status: 'IDLE', quarantineReason: null });
  });
});
