/**
 * Placement rules beside the tag match (DESIGN §3, §17), through GraphQL and the scheduler on the
 * real database: a worker without a fresh metadata report gets no work, and a request a worker
 * released is not offered to that worker again during the release backoff, with both shown in the
 * diagnosis and the worker status.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

const NOOP_METADATA = { architectures: ['amd64'], tasks: [{ type: 'worker', name: 'noop', version: 1 }] };

const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;
const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { status diagnosis { state availableWorkers unavailableWorkers { reason count } releaseBackoffs { workerName until } } } }`;

/** A worker whose admin gave it static metadata that matches the noop task: its tags match before it ever reports. */
async function register(name: string): Promise<string> {
  const reg = await t.gql(`mutation($n: String!, $s: WorkerMetadataInput) { registerWorker(input: { name: $n, staticMetadata: $s }) { ... on WorkerTokenPayload { token } ... on Error { message } } }`, {
    n: name,
    s: NOOP_METADATA,
  });
  const token = reg.data!.registerWorker.token as string;
  expect(token, JSON.stringify(reg)).toBeDefined();
  return token;
}

async function report(token: string): Promise<void> {
  const rep = await t.gql(`mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`, { m: NOOP_METADATA }, token);
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

describe('metadata freshness (DESIGN §3)', () => {
  it('a connected worker that never reported its metadata gets no work, is STALE, and gets work once it reports', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "fresh/main" }) { __typename } }`);
    const token = await register('fresh-1');
    const id = await noop('fresh/main');
    // Its pull connects it (a heartbeat), but a heartbeat is no report: nothing, from the pull or a pass.
    expect(await pull(token)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    expect(await statusOf('fresh-1')).toBe('STALE');
    expect((await diagnosisOf(id)).diagnosis).toMatchObject({ state: 'WAITING_FOR_WORKERS', availableWorkers: 0, unavailableWorkers: [{ reason: 'STALE', count: 1 }] });
    await report(token);
    expect(await statusOf('fresh-1')).toBe('IDLE');
    expect(await pull(token)).toBe(id);
  });

  it('a report older than the freshness setting makes it STALE again, heartbeats or not', async () => {
    const token = await register('fresh-2');
    await report(token);
    await t.sql(`update worker set metadata_reported_at = now() - make_interval(secs => ?) where name = 'fresh-2'`, [t.app.config.metadataFreshMs / 1000 + 60]);
    const id = await noop('fresh/main');
    expect(await pull(token)).toBeNull();
    expect(await statusOf('fresh-2')).toBe('STALE');
    await report(token);
    expect(await pull(token)).toBe(id);
  });
});

describe('release backoff (DESIGN §17)', () => {
  it('a released request is not offered to the worker that released it, by a pull or a pass, while another takes it; diagnosis says so', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "release/main" }) { __typename } }`);
    const a = await register('rel-a');
    await report(a);
    const id = await noop('release/main');
    expect(await pull(a)).toBe(id);
    const released = await t.gql(`mutation($id: ID!) { releaseWorkRequest(id: $id, reason: "no handler for noop") { ... on WorkRequest { status } } }`, { id }, a);
    expect(released.data!.releaseWorkRequest).toEqual({ status: 'PENDING' });
    // The loop the issue found: the same worker asking again at once. It gets nothing now.
    expect(await pull(a)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    const d = await diagnosisOf(id);
    expect(d.diagnosis).toMatchObject({ state: 'WAITING_FOR_BACKOFF', availableWorkers: 0, releaseBackoffs: [{ workerName: 'rel-a' }] });
    const until = new Date(d.diagnosis.releaseBackoffs[0].until).getTime();
    expect(Math.abs(until - (Date.now() + t.app.config.releaseBackoffMs))).toBeLessThan(60_000);
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
    await t.gql(`mutation($id: ID!) { releaseWorkRequest(id: $id, reason: "no handler") { __typename } }`, { id }, c);
    expect(await pull(c)).toBeNull();
    await t.sql(`update release_backoff set until = now() - interval '1 second' where work_request_id = ?`, [Number(id)]);
    expect(await pull(c)).toBe(id);
  });
});
