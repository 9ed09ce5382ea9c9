/**
 * Coming work through the API (src/scheduler/rules/look-ahead.ts): a BLOCKED request that waits only
 * on running work counts in provisioningDemand apart from pending work, and its pool launches for it;
 * one that waits on pending work, or that nothing could run, counts for nothing. A workflow's checks
 * are coming work while its sbuild runs.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

const META = (arch: string) => ({
  architectures: [arch],
  cpuCount: 4,
  totalPhysicalMemory: 8 * 1024 ** 3,
  diskFree: 60 * 1024 ** 3,
  executors: ['unshare'],
  tools: ['sbuild', 'lintian', 'autopkgtest', 'piuparts'],
  tasks: ['sbuild', 'lintian', 'autopkgtest', 'piuparts', 'noop'].map((name) => ({ type: 'worker', name, version: 1 })),
});

async function worker(name: string, arch: string): Promise<string> {
  const reg = await t.gql(
    `mutation($n: String!) { registerWorker(input: { name: $n }) { ... on WorkerTokenPayload { token } } }`,
    { n: name },
  );
  const token = reg.data!.registerWorker.token as string;
  const rep = await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: META(arch) },
    token,
  );
  expect(rep.data!.reportWorkerMetadata.__typename).toBe('Worker');
  return token;
}

async function sbuild(arch: string, dependsOn: string[] = []): Promise<string> {
  const r = await t.gql(
    `mutation($d: JSON!, $deps: [ID!]) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "sbuild", taskData: $d, dependsOn: $deps }) { ... on WorkRequest { id } ... on Error { code message } } }`,
    { d: { source_package: 'hello', host_architecture: arch }, deps: dependsOn },
  );
  expect(r.data!.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
  return r.data!.createWorkRequest.id as string;
}

async function run(token: string): Promise<string> {
  const got = await t.gql(`mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`, {}, token);
  const id = got.data!.requestWork.workRequest.id as string;
  const started = await t.gql(
    `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { ... on WorkRequest { status } } }`,
    { id },
    token,
  );
  expect(started.data!.startWorkRequest.status).toBe('RUNNING');
  return id;
}

const DEMAND = `{ provisioningDemand { pendingTotal comingTotal pools { pool { name } pendingRunnable pendingAssigned comingRunnable comingAssigned launch } unschedulable { count } } }`;

const pool = (name: string, arch: string) =>
  t.gql(
    `mutation($n: String!, $tags: [String!]!) { createWorkerPool(input: { name: $n, providerType: "local", providedTags: $tags, maxActiveInstances: 3 }) { __typename } }`,
    {
      n: name,
      tags: [
        `worker:build-arch:${arch}`,
        'worker:executor:unshare',
        'worker:cap:sbuild',
        'worker:cap:lintian',
        'worker:cap:autopkgtest',
        'worker:cap:piuparts',
        ...['sbuild', 'lintian', 'autopkgtest', 'piuparts'].map((n) => `worker:task:worker:${n}:version:1`),
      ],
    },
  );

describe('coming work in demand', () => {
  it('counts what waits only on running work, apart from pending; not what waits on pending work or what nothing runs', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const amd = await worker('amd-1', 'amd64');
    expect((await pool('cloud-riscv', 'riscv64')).data!.createWorkerPool.__typename).toBe('WorkerPool');

    const running = await sbuild('amd64');
    expect(await run(amd)).toBe(running);
    await sbuild('riscv64', [running]); // coming, for the pool
    await sbuild('s390x', [running]); // would be coming, but nothing could run it
    const stuck = await sbuild('mips64el'); // pending, unschedulable
    await sbuild('riscv64', [stuck]); // waits on pending work: nothing

    const before = await t.gql(DEMAND);
    expect(before.data!.provisioningDemand).toEqual({
      pendingTotal: 1,
      comingTotal: 1,
      pools: [
        {
          pool: { name: 'cloud-riscv' },
          pendingRunnable: 0,
          pendingAssigned: 0,
          comingRunnable: 1,
          comingAssigned: 1,
          launch: 1,
        },
      ],
      unschedulable: [{ count: 1 }],
    });

    // Its dependency done, the riscv64 request is pending: no longer coming.
    const done = await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { ... on WorkRequest { status } } }`,
      { id: running },
      amd,
    );
    expect(done.data!.completeWorkRequest.status).toBe('COMPLETED');
    const after = await t.gql(DEMAND);
    expect(after.data!.provisioningDemand).toMatchObject({
      pendingTotal: 3, // the riscv64 one, the s390x one (unschedulable), the mips64el one
      comingTotal: 0,
      pools: [{ pendingRunnable: 1, pendingAssigned: 1, comingRunnable: 0, comingAssigned: 0, launch: 1 }],
    });
  });

  it("a workflow's checks are coming work while its sbuild runs", async () => {
    const r = await t.gql(
      `mutation { createEnvironment(input: { codename: "trixie", architecture: "amd64" }) { __typename } }`,
    );
    expect(r.data!.createEnvironment.__typename).toBe('Environment');
    const amd = await worker('amd-2', 'amd64');
    expect((await pool('cloud-amd64', 'amd64')).data!.createWorkerPool.__typename).toBe('WorkerPool');
    const wf = await t.gql(
      `mutation($d: JSON!) { createWorkRequest(input: { workspace: "debian/main", taskType: "workflow", taskName: "debian_pipeline", taskData: $d }) { ... on WorkRequest { id } ... on Error { code message } } }`,
      { d: { source_package: 'hello', vendor: 'debian', codename: 'trixie', architectures: ['amd64'] } },
    );
    expect(wf.data!.createWorkRequest.id, JSON.stringify(wf)).toBeDefined();
    // The sbuild went straight to the idle worker; the checks wait BLOCKED for it.
    const nothing = await t.gql(DEMAND);
    expect(nothing.data!.provisioningDemand.comingTotal).toBe(0);
    await run(amd);
    const demand = await t.gql(DEMAND);
    const checks = demand.data!.provisioningDemand.comingTotal as number;
    expect(checks).toBeGreaterThanOrEqual(2); // lintian, autopkgtest (and piuparts where the pipeline has it)
    expect(demand.data!.provisioningDemand.pools[0]).toMatchObject({
      comingRunnable: checks,
      comingAssigned: checks - 1,
    }); // amd-1, idle since the first test, will take one
    expect(demand.data!.provisioningDemand.pools[0].launch).toBeGreaterThan(0);
  });
});
