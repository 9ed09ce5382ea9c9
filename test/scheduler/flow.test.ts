import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

const META = (arch: string, extra: Record<string, unknown> = {}) => ({
  architectures: [arch],
  cpuCount: 4,
  totalPhysicalMemory: 8 * 1024 ** 3,
  diskFree: 60 * 1024 ** 3,
  executors: ['unshare'],
  tools: ['sbuild'],
  tasks: [
    { type: 'worker', name: 'sbuild', version: 1 },
    { type: 'worker', name: 'noop', version: 1 },
  ],
  ...extra,
});

async function worker(name: string, arch: string, concurrency = 1) {
  const reg = await t.gql(
    `mutation($n: String!, $c: Int) { registerWorker(input: { name: $n, concurrency: $c }) { ... on WorkerTokenPayload { token } } }`,
    {
      n: name,
      c: concurrency,
    },
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

async function sbuild(arch: string, priorityBase = 0) {
  const r = await t.gql(
    `mutation($d: JSON!, $p: Int) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "sbuild", taskData: $d, priorityBase: $p }) { ... on WorkRequest { id } ... on Error { code message } } }`,
    { d: { source_package: 'hello', host_architecture: arch }, p: priorityBase },
  );
  expect(r.data!.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
  return r.data!.createWorkRequest.id as string;
}

const REQUEST_WORK = `mutation { requestWork { ... on RequestWorkPayload { workRequest { id status worker { name } } } ... on Error { code message } } }`;

describe('scheduling through the API', () => {
  it('assigns by tags and priority, reports candidates, diagnosis and demand', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const amd = await worker('amd-1', 'amd64');
    const arm = await worker('arm-1', 'arm64');
    const low = await sbuild('arm64', 0);
    const high = await sbuild('arm64', 5);
    const amdJob = await sbuild('amd64', 0);
    const riscv = await sbuild('riscv64', 0);

    const cands = await t.gql(
      `query($ids: [ID!]!) { candidateWorkers(workRequestIds: $ids) { workRequestId count workerNames } }`,
      { ids: [low, amdJob, riscv] },
    );
    expect(cands.data!.candidateWorkers).toEqual([
      { workRequestId: low, count: 1, workerNames: ['arm-1'] },
      { workRequestId: amdJob, count: 1, workerNames: ['amd-1'] },
      { workRequestId: riscv, count: 0, workerNames: [] },
    ]);

    const diag = await t.gql(
      `query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingWorkers mismatches { workerNames missingOnWorker missingOnTask } } } }`,
      {
        id: riscv,
      },
    );
    expect(diag.data!.workRequest.diagnosis.state).toBe('UNSCHEDULABLE');
    expect(diag.data!.workRequest.diagnosis.mismatches).toEqual(
      expect.arrayContaining([
        { workerNames: ['amd-1'], missingOnWorker: ['worker:build-arch:riscv64'], missingOnTask: [] },
      ]),
    );

    // The arm worker gets the higher priority arm64 request first, then the other one; never the amd64 one.
    const first = await t.gql(REQUEST_WORK, {}, arm);
    expect(first.data!.requestWork.workRequest).toMatchObject({
      id: high,
      status: 'ASSIGNED',
      worker: { name: 'arm-1' },
    });
    const full = await t.gql(REQUEST_WORK, {}, arm);
    expect(full.data!.requestWork.workRequest).toBeNull(); // concurrency 1
    const started = await t.gql(
      `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { ... on WorkRequest { status } } }`,
      { id: high },
      arm,
    );
    expect(started.data!.startWorkRequest.status).toBe('RUNNING');
    const done = await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { ... on WorkRequest { status result } } }`,
      { id: high },
      arm,
    );
    expect(done.data!.completeWorkRequest).toEqual({ status: 'COMPLETED', result: 'SUCCESS' });
    const second = await t.gql(REQUEST_WORK, {}, arm);
    expect(second.data!.requestWork.workRequest).toMatchObject({ id: low });

    // A full pass gives the amd64 request to the amd64 worker; the riscv64 one stays pending.
    const assigned = await t.app.scheduler.runPass();
    expect(assigned).toEqual([
      {
        workRequestId: Number(amdJob),
        workerId: expect.any(Number),
        workspaceId: expect.any(Number),
        pendingAt: expect.any(Date),
      },
    ]);
    const other = await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ... on Error { code } } }`,
      { id: amdJob },
      arm,
    );
    expect(other.data!.completeWorkRequest).toEqual({ __typename: 'NotFoundError', code: 'NOT_FOUND' });

    await t.gql(
      `mutation { createWorkerPool(input: { name: "cloud-riscv", providerType: "local", providedTags: ["worker:build-arch:riscv64", "worker:executor:unshare", "worker:cap:sbuild", "worker:task:worker:sbuild:version:1"], maxActiveInstances: 3 }) { __typename } }`,
    );
    const demand = await t.gql(
      `{ provisioningDemand { pendingTotal pools { pool { name } pendingRunnable launch workersRequired } unschedulable { count } } }`,
    );
    expect(demand.data!.provisioningDemand).toEqual({
      pendingTotal: 1,
      pools: [{ pool: { name: 'cloud-riscv' }, pendingRunnable: 1, launch: 1, workersRequired: 1 }],
      unschedulable: [],
    });
    void amd;
  });
});

describe('the pull answer', () => {
  it('is the request as it now stands, as workRequest(id) answers it', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/pull-answer" }) { __typename } }`);
    const token = await worker('pull-answer', 'riscv64');
    const created = await t.gql(
      `mutation($d: JSON!) { createWorkRequest(input: { workspace: "debian/pull-answer", taskType: "worker", taskName: "sbuild", taskData: $d }) { ... on WorkRequest { id } } }`,
      { d: { source_package: 'hello', host_architecture: 'riscv64' } },
    );
    const id = created.data!.createWorkRequest.id as string;
    const FIELDS =
      'id status taskType taskName taskData priority retryCount workspace { name } createdBy { username } worker { name } assignedAt pendingAt startedAt requiredTags { tag }';
    const pulled = await t.gql(
      `mutation { requestWork { ... on RequestWorkPayload { workRequest { ${FIELDS} } } ... on Error { code message } } }`,
      {},
      token,
    );
    const answer = pulled.data!.requestWork.workRequest;
    expect(answer).toMatchObject({
      id,
      status: 'ASSIGNED',
      taskData: { source_package: 'hello', host_architecture: 'riscv64' },
      workspace: { name: 'debian/pull-answer' },
      createdBy: { username: 'admin' },
      worker: { name: 'pull-answer' },
      startedAt: null,
    });
    expect(answer.assignedAt).toEqual(expect.any(String));
    const read = await t.gql(`query($id: ID!) { workRequest(id: $id) { ${FIELDS} } }`, { id });
    expect(answer).toEqual(read.data!.workRequest);
  });
});
