/**
 * Retirements with TAGSCHED_PROVISIONER=off (docs/operating/pools.md, "Instance lifetimes" and "Sites
 * with their own script"): a site's own script records its instances (createInstance), and every
 * retirement reaches it. A retired worker takes no new work (DRAINING, with its reason); once it holds
 * nothing it is in its pool's `stopWorkers` at once, without waiting for the idle timeout, and the
 * server's own turn (the provisioner's schedule, which with the provisioner off only retires and calls
 * no provider) stops it: its worker terminated, its instance STOPPING, for the script to stop and record.
 * For each of the three: maxWorkRequestsPerInstance, maxInstanceLifetimeSeconds, a rollout.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  createPool,
  createWorkspace,
  ERROR_FIELDS,
  expectResult,
  NOOP_METADATA,
  ok,
  reportMetadata,
  submitOk,
} from '../helpers/fixtures.js';

// The provisioner's turns come on events, debounced by this much; none comes by the clock in a test.
const DEBOUNCE_MS = 2000;
const t = useTestApp({ provisioner: { enabled: false, cycleDebounceMs: DEBOUNCE_MS, cycleIntervalMs: 600_000 } });

const noop = { workspace: 'script/ws', taskType: 'worker', taskName: 'noop', taskData: {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Until the turn the last events asked for has run (and the one its own events asked for). */
const quiet = () => sleep(2 * DEBOUNCE_MS + 500);

/** What a site's script does for a new machine: records the instance, and the machine's agent activates and connects. */
async function scriptLaunches(pool: string, name: string): Promise<string> {
  const created = await expectResult(
    t,
    'InstanceLaunchPayload',
    `mutation($p: String!, $n: String) { createInstance(input: { pool: $p, name: $n }) { __typename ... on InstanceLaunchPayload { activationToken } ${ERROR_FIELDS} } }`,
    { p: pool, n: name },
  );
  const activated = await expectResult(
    t,
    'WorkerTokenPayload',
    `mutation($n: String) { activateWorker(input: { name: $n }) { __typename ... on WorkerTokenPayload { token } ${ERROR_FIELDS} } }`,
    { n: name },
    created.activationToken,
  );
  await reportMetadata(t, activated.token, NOOP_METADATA);
  return activated.token as string;
}

const REQUEST_WORK = `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`;
const take = async (token: string) =>
  (await ok(t, REQUEST_WORK, {}, token)).requestWork.workRequest as { id: string } | null;
const start = (id: string, token: string) =>
  ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);
const complete = (id: string, token: string) =>
  ok(
    t,
    `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
    { id },
    token,
  );

/** What the script reads: its pool's demand (launches, workers to stop) and its instances to stop. */
async function scriptReads(pool: string) {
  const r = await ok(
    t,
    `query($p: String!) {
      provisioningDemand { pools { pool { name } launch stopWorkers { name } } }
      workerPool(name: $p) { instances(states: [STOPPING]) { edges { node { name state } } } }
    }`,
    { p: pool },
  );
  const demand = r.provisioningDemand.pools.find((d: { pool: { name: string } }) => d.pool.name === pool);
  return {
    launch: demand.launch as number,
    stopWorkers: (demand.stopWorkers as { name: string }[]).map((w) => w.name),
    stopping: (r.workerPool.instances.edges as { node: { name: string } }[]).map((e) => e.node.name),
  };
}

const workerOf = async (name: string) =>
  (await ok(t, `query($n: String!) { worker(name: $n) { status retiringReason } instance(name: $n) { state } }`, {
    n: name,
  })) as {
    worker: { status: string; retiringReason: string | null };
    instance: { state: string };
  };

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** The script stops the machine and records it; its worker is gone for good. */
async function scriptStops(name: string): Promise<void> {
  expect(
    await expectResult(
      t,
      'Instance',
      `mutation($n: String!) { recordInstanceStopped(input: { name: $n }) { __typename ... on Instance { state } ${ERROR_FIELDS} } }`,
      { n: name },
    ),
  ).toMatchObject({ state: 'TERMINATED' });
}

beforeAll(async () => {
  await createWorkspace(t, 'script/ws');
});

describe('retirements a site’s own script sees, with the provisioner off', () => {
  it('maxWorkRequestsPerInstance 1: drained by its one assignment, a replacement asked for, in stopWorkers once idle, then STOPPING', async () => {
    await createPool(t, {
      name: 'fresh',
      maxActiveInstances: 3,
      maxWorkRequestsPerInstance: 1,
      specifications: { enableTasks: ['noop'] },
    });
    const token = await scriptLaunches('fresh', 'fresh-1');
    await submitOk(t, noop);
    await submitOk(t, noop);
    const got = (await take(token))!;
    expect(await workerOf('fresh-1')).toMatchObject({
      worker: { status: 'DRAINING', retiringReason: 'WORK_REQUESTS' },
    });
    expect(await take(token)).toBeNull(); // the second is not its
    expect(await scriptReads('fresh')).toEqual({ launch: 1, stopWorkers: [], stopping: [] }); // a replacement, for the second
    await start(got.id, token);
    await complete(got.id, token);
    // Idle: the script is told to stop it now, not after the pool's idle timeout (10 minutes).
    expect(await scriptReads('fresh')).toMatchObject({ stopWorkers: ['fresh-1'] });

    // The server's turns run as a server does (app.start); the first one stops it.
    await t.app.start();
    await until('fresh-1 to be STOPPING', async () => (await workerOf('fresh-1')).instance.state === 'STOPPING');
    expect(await workerOf('fresh-1')).toEqual({
      worker: { status: 'INACTIVE', retiringReason: 'WORK_REQUESTS' },
      instance: { state: 'STOPPING' },
    });
    expect(await scriptReads('fresh')).toMatchObject({ stopping: ['fresh-1'] });
    await scriptStops('fresh-1');
    expect(await scriptReads('fresh')).toMatchObject({ stopWorkers: [], stopping: [] });
  });

  it('maxInstanceLifetimeSeconds: drained while it runs work, in stopWorkers once idle, then STOPPING', async () => {
    await createPool(t, {
      name: 'aging',
      maxActiveInstances: 3,
      maxInstanceLifetimeSeconds: 3600,
      specifications: { enableTasks: ['noop'] },
    });
    const token = await scriptLaunches('aging', 'aging-1');
    await submitOk(t, noop);
    const got = (await take(token))!;
    await start(got.id, token);
    await t.sql(`update worker set instance_created_at = now() - interval '2 hours' where name = 'aging-1'`);
    await submitOk(t, noop); // an event: the server's next turn
    await until('aging-1 to retire', async () => (await workerOf('aging-1')).worker.retiringReason === 'LIFETIME');
    expect(await workerOf('aging-1')).toEqual({
      worker: { status: 'DRAINING', retiringReason: 'LIFETIME' },
      instance: { state: 'RUNNING' },
    });
    await quiet();
    expect(await scriptReads('aging')).toMatchObject({ stopWorkers: [], stopping: [] }); // it runs work
    expect(await workerOf('aging-1')).toMatchObject({ instance: { state: 'RUNNING' } });

    await complete(got.id, token);
    expect(await scriptReads('aging')).toMatchObject({ stopWorkers: ['aging-1'] });
    await until('aging-1 to be STOPPING', async () => (await workerOf('aging-1')).instance.state === 'STOPPING');
    expect(await workerOf('aging-1')).toEqual({
      worker: { status: 'INACTIVE', retiringReason: 'LIFETIME' },
      instance: { state: 'STOPPING' },
    });
    expect(await scriptReads('aging')).toMatchObject({ stopping: ['aging-1'] });
    await scriptStops('aging-1');
  });

  it('a rollout: an idle instance launched from older specifications is retired and STOPPING, and demand launches its replacement', async () => {
    await createPool(t, { name: 'rolling', maxActiveInstances: 3, specifications: { enableTasks: ['noop'] } });
    await scriptLaunches('rolling', 'rolling-1');
    await quiet();
    expect(await workerOf('rolling-1')).toEqual({
      worker: { status: 'IDLE', retiringReason: null },
      instance: { state: 'RUNNING' },
    });
    await expectResult(
      t,
      'WorkerPool',
      `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ${ERROR_FIELDS} } }`,
      {
        i: { name: 'rolling', minIdleInstances: 1, specifications: { enableTasks: ['noop'], concurrency: 2 } },
      },
    );
    await until('rolling-1 to be STOPPING', async () => (await workerOf('rolling-1')).instance.state === 'STOPPING');
    expect(await workerOf('rolling-1')).toEqual({
      worker: { status: 'INACTIVE', retiringReason: 'OUTDATED' },
      instance: { state: 'STOPPING' },
    });
    expect(await scriptReads('rolling')).toEqual({ launch: 1, stopWorkers: [], stopping: ['rolling-1'] });
    await scriptStops('rolling-1');
  });
});
