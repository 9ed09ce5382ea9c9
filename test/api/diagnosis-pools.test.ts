/**
 * The diagnosis says only what is true of the pools that could run a request: an instance still
 * booting is named as launching (not counted as a disconnected worker), a pool at its
 * maxActiveInstances is said to be at its limit (not that it "could start more"), and a pool with
 * room is said to be able to start one. Through the real API and the work request's status page.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, expectResult, ok, submitOk } from '../helpers/fixtures.js';

const t = useTestApp({ provisioner: { enabled: false } });

const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingPools unavailableWorkers { reason count }
  pools { pool instances maxActiveInstances atLimit launching { name since } } } } }`;
const CREATE_INSTANCE = `mutation($p: String!, $n: String) { createInstance(input: { pool: $p, name: $n }) { __typename } }`;
const UPDATE_POOL = `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on WorkerPool { name } ... on Error { message } } }`;

let requestId = '';
let base = '';

beforeAll(async () => {
  base = (await t.app.start()).url.replace(/\/graphql$/, '');
  await createWorkspace(t, 'diag/pools');
  await createPool(t, { name: 'demo', providedTags: ['site:demo-pool'], maxActiveInstances: 1 });
  requestId = (
    await submitOk(t, {
      workspace: 'diag/pools',
      taskType: 'worker',
      taskName: 'noop',
      taskData: {},
      requiredTags: ['site:demo-pool'],
    })
  ).id;
});

const diagnosis = async () => (await ok(t, DIAGNOSIS, { id: requestId })).workRequest.diagnosis;

describe('the pools in a diagnosis', () => {
  it('a pool with room could start one', async () => {
    expect(await diagnosis()).toEqual({
      state: 'WAITING_FOR_PROVISIONING',
      matchingPools: ['demo'],
      unavailableWorkers: [],
      pools: [{ pool: 'demo', instances: 0, maxActiveInstances: 1, atLimit: [], launching: [] }],
    });
  });

  it('names a launching instance as launching, and the pool at its limit by the limit', async () => {
    const before = Date.now();
    await ok(t, CREATE_INSTANCE, { p: 'demo', n: 'demo-3' });
    const d = await diagnosis();
    expect(d).toMatchObject({
      state: 'WAITING_FOR_WORKERS',
      unavailableWorkers: [{ reason: 'LAUNCHING', count: 1 }],
      pools: [
        {
          pool: 'demo',
          instances: 1,
          maxActiveInstances: 1,
          atLimit: ['MAX_ACTIVE_INSTANCES'],
          launching: [{ name: 'demo-3' }],
        },
      ],
    });
    expect(Date.parse(d.pools[0].launching[0].since)).toBeGreaterThanOrEqual(before - 1000);

    const page = await (await fetch(`${base}/-/status/work-requests/${requestId}/`)).text();
    expect(page).toMatch(
      /launching <a href="\/-\/status\/workers\/demo-3\/">demo-3<\/a> for \d+ s; at its limit of 1 instance/,
    );
    expect(page).not.toMatch(/1 disconnected/);
  });

  it('says the pool could start another once its limit is raised, while still naming the launching one', async () => {
    await expectResult(t, 'WorkerPool', UPDATE_POOL, { i: { name: 'demo', maxActiveInstances: 3 } });
    expect((await diagnosis()).pools).toMatchObject([
      { pool: 'demo', instances: 1, maxActiveInstances: 3, atLimit: [], launching: [{ name: 'demo-3' }] },
    ]);
  });

  it('names the launch rate limit when the pool launched its most this minute', async () => {
    await expectResult(t, 'WorkerPool', UPDATE_POOL, { i: { name: 'demo', maxLaunchesPerMinute: 1 } });
    expect((await diagnosis()).pools).toMatchObject([{ pool: 'demo', atLimit: ['RATE_LIMIT'] }]); // demo-3 was requested just now
    await t.sql(`update instance set requested_at = now() - interval '2 minutes' where name = 'demo-3'`);
    expect((await diagnosis()).pools).toMatchObject([{ pool: 'demo', atLimit: [] }]);
    await expectResult(t, 'WorkerPool', UPDATE_POOL, { i: { name: 'demo', maxLaunchesPerMinute: null } });
  });

  it('a disconnected worker that is no launching instance is still disconnected', async () => {
    await t.sql(`update instance set state = 'RUNNING', started_at = now() where name = 'demo-3'`);
    expect(await diagnosis()).toMatchObject({
      unavailableWorkers: [{ reason: 'DISCONNECTED', count: 1 }],
      pools: [{ launching: [] }],
    });
  });
});

describe('a request whose only matching pool may start nothing', () => {
  it('maxActiveInstances 0: held by the pool’s limit, as its pool outlook and its start estimate say, not waiting for provisioning', async () => {
    await createPool(t, { name: 'none-at-all', providedTags: ['site:closed-pool'], maxActiveInstances: 0 });
    const id = (
      await submitOk(t, {
        workspace: 'diag/pools',
        taskType: 'worker',
        taskName: 'noop',
        taskData: {},
        requiredTags: ['site:closed-pool'],
      })
    ).id;
    const { workRequest } = await ok(
      t,
      `query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingPools pools { pool instances maxActiveInstances atLimit } startEstimate { at basis } } } }`,
      { id },
    );
    expect(workRequest.diagnosis).toEqual({
      state: 'WAITING_FOR_POOL_LIMIT',
      matchingPools: ['none-at-all'],
      pools: [{ pool: 'none-at-all', instances: 0, maxActiveInstances: 0, atLimit: ['MAX_ACTIVE_INSTANCES'] }],
      startEstimate: {
        at: null,
        basis: 'no matching worker is available or launching, and no matching pool may launch one now',
      },
    });
    const page = await (await fetch(`${base}/-/status/work-requests/${id}/`)).text();
    expect(page).toContain('every pool that could run it is held by a limit');

    // Its limit raised: it could start one, and the state says so.
    await expectResult(t, 'WorkerPool', UPDATE_POOL, { i: { name: 'none-at-all', maxActiveInstances: 1 } });
    const raised = await ok(
      t,
      `query($id: ID!) { workRequest(id: $id) { diagnosis { state pools { atLimit } startEstimate { waitSeconds } } } }`,
      { id },
    );
    expect(raised.workRequest.diagnosis).toMatchObject({ state: 'WAITING_FOR_PROVISIONING', pools: [{ atLimit: [] }] });
    expect(raised.workRequest.diagnosis.startEstimate.waitSeconds).toBeGreaterThan(0);
  });
});
