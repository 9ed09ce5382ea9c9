/**
 * The provisioner's cycle in one process, against a stand-in cloud registered through the provider
 * registry (fake-cloud.ts): it launches what demand says (each instance recorded before the provider
 * is asked, with its worker and a bound activation token), backs off and shows a pool degraded when
 * launches fail, reconciles with the provider's list (lost, unknown, interrupted, never booted),
 * stops idle workers, and never lets the provider account out.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { WorkerPoolSchema } from '../../src/storage/entities/worker-pool.js';
import { recordLaunch } from '../../src/services/pools/instances.js';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, ERROR_FIELDS, expectResult, ok, submitOk } from '../helpers/fixtures.js';
import { resetScheduling } from '../helpers/scheduler-fixtures.js';
import { bootLaunched, registerFakeCloud } from './fake-cloud.js';

const SECRET = 'fake-cloud-key-5f4e3d2c1b0a-DO-NOT-LEAK';
const cloud = registerFakeCloud('fake');
afterAll(() => cloud.unregister());

const t = useTestApp({
  provisioner: {
    enabled: true, // its cycles are run by the tests, one by one; app.start() is never called
    agentServerUrl: 'http://tagsched.test/graphql',
    launchBackoffMs: 3_600_000, // an hour: a test moves launch_retry_at itself
    launchBackoffMaxMs: 7_200_000,
    bootTimeoutMs: 60_000,
    degradedAfterFailures: 3,
  },
  providers: { callTimeoutMs: 300 },
});

const noop = { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} };
const queue = async (n: number) => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await submitOk(t, noop)).id as string);
  return ids;
};
const cycle = async (reconcile = false) => (await t.app.provisioner.runCycle({ reconcile }))!;
// Its image is built for noop: its template runs the requests of these tests.
const fakePool = (name: string, extra: { specifications?: Record<string, unknown>; [key: string]: unknown } = {}) =>
  createPool(t, {
    name,
    providerType: 'fake',
    providerAccount: { apiKey: SECRET },
    ...extra,
    specifications: { enableTasks: ['noop'], ...extra.specifications },
  });

interface InstanceRow {
  name: string;
  state: string;
  provider_id: string | null;
  error: string | null;
  worker: string | null;
  terminated: boolean;
  terminate_requested: boolean;
}
const instances = () =>
  t.sql<InstanceRow>(
    `select i.name, i.state, i.provider_id, i.error, w.name as worker, w.terminated_at is not null as terminated, i.terminate_requested_at is not null as terminate_requested
       from instance i left join worker w on w.id = i.worker_id order by i.id`,
  );
const poolRow = async (name: string) =>
  (
    await t.sql<{
      launch_failures: number;
      launch_retry_at: Date | null;
      last_error: string | null;
      last_error_kind: string | null;
    }>(`select launch_failures, launch_retry_at, last_error, last_error_kind from worker_pool where name = ?`, [name])
  )[0];
const retryNow = (name: string) =>
  t.sql(`update worker_pool set launch_retry_at = now() - interval '1 second' where name = ?`, [name]);
const DEMAND = `{ provisioningDemand { pools { pool { name degraded lastError } launch limitedBy degraded lastError } } }`;

const boot = (index: number) => bootLaunched(t, cloud, index);

/** A pool of one instance whose worker (booted) has pulled and started a request: its id and the worker's token. */
async function runningOnFirstInstance(pool: string): Promise<{ id: string; token: string }> {
  await fakePool(pool, { maxActiveInstances: 1 });
  const [id] = await queue(1);
  await cycle();
  const token = await boot(0);
  const pulled = await ok(
    t,
    `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`,
    {},
    token,
  );
  expect(pulled.requestWork.workRequest.id).toBe(id);
  await ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);
  return { id, token };
}

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
});
beforeEach(async () => {
  await resetScheduling(t);
  cloud.reset();
});

describe('the provisioner cycle', () => {
  it('launches what demand says, each instance recorded first with its worker and a bound token, and launches nothing twice', async () => {
    await fakePool('fake-a', { maxActiveInstances: 3, specifications: { concurrency: 1, cpuCount: 2 } });
    await queue(5);
    expect(await cycle()).toMatchObject({ launched: 3, launchFailures: 0 });
    expect(cloud.launches).toHaveLength(3);
    for (const { spec, account } of cloud.launches) {
      expect(spec.pool).toBe('fake-a');
      expect(spec.name).toMatch(/^fake-a-[0-9a-f]{8}$/);
      expect(spec.agent).toEqual({
        serverUrl: 'http://tagsched.test/graphql',
        workerName: spec.name,
        activationToken: expect.stringMatching(/^tsk_activation_/),
      });
      expect(spec.userData).toContain(`TAGSCHED_WORKER_NAME=${spec.name}`);
      expect(spec.userData).toContain(`TAGSCHED_ACTIVATION_TOKEN=${spec.agent.activationToken}`);
      expect(spec.specifications).toMatchObject({ concurrency: 1, cpuCount: 2 });
      expect(account).toEqual({ apiKey: SECRET });
    }
    expect(await instances()).toEqual(
      cloud.launches.map(({ spec }, i) => ({
        name: spec.name,
        state: 'LAUNCHING',
        provider_id: `fake-${i + 1}`,
        error: null,
        worker: spec.name,
        terminated: false,
        terminate_requested: false,
      })),
    );
    // Each activation token is bound to its worker.
    expect(
      await t.sql(
        `select count(*)::int as n from token t join worker w on w.id = t.worker_id where t.kind = 'activation' and w.name like 'fake-a-%'`,
      ),
    ).toEqual([{ n: 3 }]);
    // The starting instances count: nothing more is launched, reconciling or not.
    expect(await cycle()).toMatchObject({ launched: 0 });
    expect(await cycle(true)).toMatchObject({ launched: 0, lost: 0, strays: 0, failed: 0 });
    expect(cloud.launches).toHaveLength(3);
    // Its agent comes up: the instance is RUNNING.
    await boot(0);
    expect((await instances())[0]).toMatchObject({ state: 'RUNNING' });
    // Its launch is measured: the pool's launch time is this one's, from its request to its worker's first connection.
    const [measured] = await t.sql<{ launch_seconds: number; launch_samples: number; took: number }>(
      `select p.launch_seconds, p.launch_samples, extract(epoch from (i.started_at - i.requested_at))::float8 as took
         from instance i join worker_pool p on p.id = i.pool_id where i.name = ?`,
      [cloud.launches[0].spec.name],
    );
    expect(measured.launch_samples).toBe(1);
    expect(Number(measured.launch_seconds)).toBeCloseTo(measured.took, 3);
  });

  it('backs off after a failed launch, shows the pool degraded when launches keep failing, and recovers', async () => {
    await fakePool('fake-q');
    await queue(2);
    cloud.behaviour = { kind: 'fail', error: 'quota', message: `quota exceeded for account ${SECRET}` };
    expect(await cycle()).toMatchObject({ launched: 0, launchFailures: 1 });
    const [failed] = await instances();
    expect(failed).toMatchObject({
      state: 'FAILED',
      provider_id: null,
      error: 'quota exceeded for account [redacted]',
      terminated: true,
    });
    expect(await poolRow('fake-q')).toMatchObject({
      launch_failures: 1,
      last_error: 'quota exceeded for account [redacted]',
      last_error_kind: 'quota',
    });
    expect(new Date((await poolRow('fake-q')).launch_retry_at!).getTime()).toBeGreaterThan(Date.now() + 3_000_000);
    // Its activation token is dead with its worker.
    expect(
      (
        await t.gql(
          `mutation { activateWorker(input: {}) { __typename } }`,
          {},
          cloud.launches[0].spec.agent.activationToken,
        )
      ).status,
    ).toBe(401);

    // During the backoff: no launch, and the demand says why.
    expect(await cycle()).toMatchObject({ launched: 0, launchFailures: 0 });
    expect(cloud.launches).toHaveLength(1);
    let { provisioningDemand: d } = await ok(t, DEMAND);
    expect(d.pools).toEqual([
      {
        pool: { name: 'fake-q', degraded: false, lastError: 'quota exceeded for account [redacted]' },
        launch: 0,
        limitedBy: ['BACKOFF'],
        degraded: false,
        lastError: 'quota exceeded for account [redacted]',
      },
    ]);

    // Two more failures (each after its backoff): degraded.
    for (const failures of [2, 3]) {
      await retryNow('fake-q');
      expect(await cycle()).toMatchObject({ launchFailures: 1 });
      expect((await poolRow('fake-q')).launch_failures).toBe(failures);
    }
    ({ provisioningDemand: d } = await ok(t, DEMAND));
    expect(d.pools[0]).toMatchObject({ degraded: true, pool: { degraded: true } });

    // The quota is raised: the next try launches everything, and the pool is healthy again.
    cloud.behaviour = { kind: 'ok' };
    await retryNow('fake-q');
    expect(await cycle()).toMatchObject({ launched: 2, launchFailures: 0 });
    expect(await poolRow('fake-q')).toMatchObject({
      launch_failures: 0,
      launch_retry_at: null,
      last_error_kind: 'quota',
    });
    ({ provisioningDemand: d } = await ok(t, DEMAND));
    expect(d.pools[0]).toMatchObject({ degraded: false, launch: 0, limitedBy: [] });
    // The provider account never came out.
    expect(JSON.stringify([d, await instances(), await t.sql(`select last_error from worker_pool`)])).not.toContain(
      SECRET,
    );
  });

  it('counts a launch that does not answer in time as a timeout', async () => {
    await fakePool('fake-t');
    await queue(1);
    cloud.behaviour = { kind: 'hang' };
    expect(await cycle()).toMatchObject({ launched: 0, launchFailures: 1 });
    expect((await instances())[0]).toMatchObject({
      state: 'FAILED',
      error: 'pool fake-t: launch took longer than 0.3 s',
      terminated: true,
    });
    expect(await poolRow('fake-t')).toMatchObject({ launch_failures: 1, last_error_kind: 'timeout' });
  });

  it('terminates the worker of an instance the provider lost, re-queues its running work, and replaces it', async () => {
    const { id, token } = await runningOnFirstInstance('fake-l');

    cloud.lose('fake-1');
    expect(await cycle(true)).toMatchObject({ lost: 1, launched: 1 });
    const [lost, replacement] = await instances();
    expect(lost).toMatchObject({
      state: 'TERMINATED',
      error: 'the provider no longer has its instance',
      terminated: true,
    });
    expect(replacement).toMatchObject({ state: 'LAUNCHING', provider_id: 'fake-2', terminated: false });
    expect(
      await t.sql(`select status, retry_count, status_reason from work_request where id = ?`, [Number(id)]),
    ).toEqual([
      {
        status: 'PENDING',
        retry_count: 1,
        status_reason: `worker ${lost.name} was terminated (the provider no longer has its instance); re-queued (retry 1 of 3)`,
      },
    ]);
    expect((await t.gql(`mutation { heartbeat(input: {}) { __typename } }`, {}, token)).status).toBe(401);
  });

  it('takes an end the provider dates after the cycle began (its clock ahead, or the instance ended while listed) as the instance’s own, at the cycle’s time', async () => {
    const { id } = await runningOnFirstInstance('fake-e');

    cloud.end('fake-1', new Date(Date.now() + 60_000));
    const before = Date.now();
    expect(await cycle(true)).toMatchObject({ lost: 1 });
    const [ended] = await instances();
    expect(ended).toMatchObject({ state: 'TERMINATED', error: 'its instance ended by itself', terminated: true });
    const [{ ms }] = await t.sql<{ ms: string }>(
      `select extract(epoch from terminated_at) * 1000 as ms from instance where provider_id = 'fake-1'`,
    );
    expect(Number(ms)).toBeLessThanOrEqual(Date.now());
    expect(Number(ms)).toBeGreaterThanOrEqual(before - 1000);
    expect(await t.sql(`select status, status_reason from work_request where id = ?`, [Number(id)])).toEqual([
      {
        status: 'PENDING',
        status_reason: `worker ${ended.name} was terminated (its instance ended by itself); re-queued (retry 1 of 3)`,
      },
    ]);
  });

  it('terminates what the provider has and tagsched does not know, or knows as ended', async () => {
    await fakePool('fake-u');
    cloud.plant('fake-u', 'stranger-1', 'not-from-here');
    cloud.plant('fake-u', 'stranger-2', null);
    await t.app.orm.em
      .fork()
      .getConnection()
      .execute(
        `insert into instance (name, pool_id, state, requested_at, terminated_at, provider_id) select 'fake-u-ended', id, 'TERMINATED', now() - interval '1 hour', now() - interval '30 minutes', 'old-1' from worker_pool where name = 'fake-u'`,
      );
    cloud.plant('fake-u', 'old-1', 'fake-u-ended');
    expect(await cycle(true)).toMatchObject({ strays: 3, lost: 0 });
    expect(cloud.terminated.sort()).toEqual(['old-1', 'stranger-1', 'stranger-2']);
  });

  it('finds the instance of a launch a stopped server never recorded, and fails one the provider never got', async () => {
    await fakePool('fake-i');
    const em = t.app.orm.em.fork();
    const pool = await em.findOneOrFail(WorkerPoolSchema, { name: 'fake-i' });
    // A server recorded these, asked the provider for the first, and stopped before it could write the answer.
    const reached = await recordLaunch(em.fork(), t.app.config.tags, pool, new Date());
    const lostOnTheWay = await recordLaunch(em.fork(), t.app.config.tags, pool, new Date());
    cloud.plant('fake-i', 'fake-77', reached.instance.name);
    expect(await cycle(true)).toMatchObject({ adopted: 1, failed: 1, launched: 0 });
    expect(await instances()).toEqual([
      {
        name: reached.instance.name,
        state: 'LAUNCHING',
        provider_id: 'fake-77',
        error: null,
        worker: reached.worker.name,
        terminated: false,
        terminate_requested: false,
      },
      {
        name: lostOnTheWay.instance.name,
        state: 'FAILED',
        provider_id: null,
        error: 'its launch was interrupted and the provider has no such instance',
        worker: lostOnTheWay.worker.name,
        terminated: true,
        terminate_requested: false,
      },
    ]);
    expect(cloud.launches).toHaveLength(0);
  });

  it('fails an instance whose worker never connected within the boot timeout, and stops it at the provider', async () => {
    await fakePool('fake-b');
    await queue(1);
    await cycle();
    await t.sql(`update instance set requested_at = now() - interval '2 minutes'`);
    await t.sql(`update work_request set status = 'ABORTED'`); // nothing to replace it for
    expect(await cycle(true)).toMatchObject({ failed: 1, launched: 0 });
    expect((await instances())[0]).toMatchObject({
      state: 'FAILED',
      error: 'its worker did not connect within 60 s of its launch',
      terminated: true,
    });
    expect(cloud.terminated).toEqual(['fake-1']);
  });

  it('stops idle workers past the idle timeout, never one holding work, and counts their runtime', async () => {
    await fakePool('fake-s', { idleTimeoutSeconds: 0, maxActiveInstances: 2 });
    const [first, second] = await queue(2);
    await cycle();
    const tokens = [await boot(0), await boot(1)];
    const pull = async (token: string) =>
      (await ok(t, `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`, {}, token))
        .requestWork.workRequest.id as string;
    const a = await pull(tokens[0]);
    const b = await pull(tokens[1]);
    expect([a, b].sort()).toEqual([first, second].sort());
    await ok(
      t,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id: b },
      tokens[1],
    );

    // The idle one is stopped; the one holding work is not.
    expect(await cycle()).toMatchObject({ stopped: 1 });
    let rows = await instances();
    expect(rows.map((r) => [r.state, r.terminated, r.terminate_requested])).toEqual([
      ['RUNNING', false, false],
      ['STOPPING', true, true],
    ]);
    expect(cloud.terminated).toEqual(['fake-2']);
    // The provider no longer lists it: TERMINATED.
    expect(await cycle(true)).toMatchObject({ stopped: 0, lost: 0 });
    rows = await instances();
    expect(rows[1]).toMatchObject({ state: 'TERMINATED', error: null });

    await ok(
      t,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id: a },
      tokens[0],
    );
    expect(await cycle()).toMatchObject({ stopped: 1 });
    await cycle(true);
    expect((await instances()).map((r) => r.state)).toEqual(['TERMINATED', 'TERMINATED']);
    const { workerPool } = await ok(
      t,
      `{ workerPool(name: "fake-s") { monthRuntimeSeconds instances { edges { node { runtimeSeconds terminatedAt } } } } }`,
    );
    const runtimes = workerPool.instances.edges.map((e: { node: { runtimeSeconds: number } }) => e.node.runtimeSeconds);
    expect(runtimes.every((s: number) => s > 0)).toBe(true);
    expect(workerPool.monthRuntimeSeconds).toBeCloseTo(
      runtimes.reduce((x: number, y: number) => x + y, 0),
      3,
    );
  });

  it('stops at the provider what an admin terminated', async () => {
    await fakePool('fake-x');
    await queue(1);
    await cycle();
    const name = cloud.launches[0].spec.name;
    await expectResult(
      t,
      'Worker',
      `mutation($n: String!) { terminateWorker(input: { name: $n }) { __typename ${ERROR_FIELDS} } }`,
      { n: name },
    );
    expect((await instances())[0]).toMatchObject({ state: 'STOPPING', terminate_requested: false });
    await t.sql(`update work_request set status = 'ABORTED'`);
    await cycle();
    expect(cloud.terminated).toEqual(['fake-1']);
    expect((await instances())[0]).toMatchObject({ state: 'STOPPING', terminate_requested: true });
  });

  it('refuses hand-kept instance records while it runs', async () => {
    await fakePool('fake-m');
    const r = await ok(t, `mutation { createInstance(input: { pool: "fake-m" }) { __typename ${ERROR_FIELDS} } }`);
    expect(r.createInstance).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
    expect(await instances()).toEqual([]);
  });
});
