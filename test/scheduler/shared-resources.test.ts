import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool } from '../helpers/fixtures.js';
import { runCli } from '../cli/admin/harness.js';

const t = useTestApp();
const GIB = 1024 ** 3;

const REPORT = {
  architectures: ['amd64'],
  cpuCount: 32, // the admin's static figures below win over the agent's
  totalPhysicalMemory: 64 * GIB,
  diskFree: 500 * GIB,
  executors: ['unshare'],
  tools: [],
  tasks: [{ type: 'worker', name: 'noop', version: 1 }],
};

async function host(name: string): Promise<string> {
  const reg = await t.gql(
    `mutation($n: String!, $m: WorkerMetadataInput!) {
       registerWorker(input: { name: $n, concurrency: 16, offersResources: true, staticMetadata: $m }) {
         ... on WorkerTokenPayload { token } ... on Error { code message } } }`,
    { n: name, m: { cpuCount: 8, totalPhysicalMemory: 16 * GIB, diskFree: 100 * GIB } },
  );
  const token = reg.data!.registerWorker.token as string;
  expect(token, JSON.stringify(reg)).toBeDefined();
  const rep = await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: REPORT },
    token,
  );
  expect(rep.data!.reportWorkerMetadata.__typename).toBe('Worker');
  return token;
}

async function submit(resources: Record<string, number> | null): Promise<string> {
  const r = await t.gql(
    `mutation($r: ResourcesInput) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {}, resources: $r }) {
       ... on WorkRequest { id } ... on Error { code message } } }`,
    { r: resources },
  );
  expect(r.data!.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
  return r.data!.createWorkRequest.id as string;
}

const PULL = `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;
const pull = async (token: string): Promise<string | null> => {
  const r = await t.gql(PULL, {}, token);
  if (!r.data) throw new Error(JSON.stringify(r));
  return (r.data.requestWork?.workRequest?.id as string | undefined) ?? null;
};

async function finish(id: string, token: string): Promise<void> {
  await t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);
  const done = await t.gql(
    `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { ... on WorkRequest { status } } }`,
    { id },
    token,
  );
  expect(done.data!.completeWorkRequest.status).toBe('COMPLETED');
}

let started: Promise<string> | null = null;
/** The app's address, listening from the first call on. */
const baseUrl = () => (started ??= t.app.start().then((a) => a.url.replace(/\/graphql$/, '')));

const WORKER = `query($n: String!) { worker(name: $n) { offersResources offeredResources { cpus memoryMib diskMib }
  freeResources { cpus memoryMib diskMib } reservation { workRequestId } activeWorkCount } }`;

describe('workers that share their resources', () => {
  it('resolves what a request reserves, packs a host by it, reserves the host for a large request and backfills around it', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const token = await host('big-1');
    const w0 = await t.gql(WORKER, { n: 'big-1' });
    expect(w0.data!.worker).toMatchObject({
      offersResources: true,
      offeredResources: { cpus: 8, memoryMib: 16 * 1024, diskMib: 100 * 1024 },
      freeResources: { cpus: 8, memoryMib: 16 * 1024, diskMib: 100 * 1024 },
      reservation: null,
    });

    // Four 2-CPU requests run at once on 8 CPUs; each figure keeps its source.
    const small = [];
    for (let i = 0; i < 5; i++) small.push(await submit({ cpus: 2, memoryMib: 2048 }));
    const shown = await t.gql(
      `query($id: ID!) { workRequest(id: $id) { resources { cpus memoryMib diskMib sources { cpus memoryMib diskMib } } userResources { cpus memoryMib diskMib } } }`,
      { id: small[0] },
    );
    expect(shown.data!.workRequest).toEqual({
      resources: {
        cpus: 2,
        memoryMib: 2048,
        diskMib: 1024,
        sources: { cpus: 'user', memoryMib: 'user', diskMib: 'task-default' },
      },
      userResources: { cpus: 2, memoryMib: 2048, diskMib: null },
    });
    const got = [await pull(token), await pull(token), await pull(token), await pull(token), await pull(token)];
    expect(got.slice(0, 4)).toEqual(small.slice(0, 4));
    expect(got[4]).toBeNull(); // 8 CPUs reserved: the fifth waits although 12 slots are left
    const w1 = await t.gql(WORKER, { n: 'big-1' });
    expect(w1.data!.worker.freeResources).toEqual({ cpus: 0, memoryMib: 8 * 1024, diskMib: 96 * 1024 });

    // A 12 GiB request, before the fifth small one in the queue: it reserves the host.
    const big = await submit({ cpus: 2, memoryMib: 12 * 1024 });
    await t.sql(`update work_request set priority_base = 10 where id = ?`, [Number(big)]);
    await finish(small[0], token);
    // 2 CPUs and 10 GiB free: the big one does not fit yet, and the small one would delay it.
    expect(await pull(token)).toBeNull();
    const w2 = await t.gql(WORKER, { n: 'big-1' });
    expect(w2.data!.worker.reservation).toEqual({ workRequestId: big });
    const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { status diagnosis { state busyWorkers resourceWaits { workerName reasons } } } }`;
    const held = await t.gql(DIAGNOSIS, { id: small[4] });
    expect(held.data!.workRequest.status).toBe('PENDING');
    expect(held.data!.workRequest.diagnosis.state).toBe('WAITING_FOR_CAPACITY');
    expect(held.data!.workRequest.diagnosis.resourceWaits).toEqual([
      {
        workerName: 'big-1',
        reasons: [expect.stringMatching(new RegExp(`^big-1 is held for work request ${big}, expected to fit at `))],
      },
    ]);
    const waiting = await t.gql(DIAGNOSIS, { id: big });
    expect(waiting.data!.workRequest.diagnosis).toEqual({
      state: 'WAITING_FOR_CAPACITY',
      busyWorkers: 1,
      resourceWaits: [{ workerName: 'big-1', reasons: ['needs 12 GiB of memory; big-1 has 10 GiB free of 16'] }],
    });

    // A worker that shares its resources is a candidate for what fits what it offers, and for nothing larger.
    const huge = await submit({ cpus: 64 });
    const CANDIDATES = `query($id: ID!) { workRequest(id: $id) { candidateWorkers(availableOnly: false) { name } } }`;
    expect((await t.gql(CANDIDATES, { id: big })).data!.workRequest.candidateWorkers).toEqual([{ name: 'big-1' }]);
    expect((await t.gql(CANDIDATES, { id: huge })).data!.workRequest.candidateWorkers).toEqual([]);
    await t.gql(`mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename } }`, { id: huge });

    // The pages and `work show` say it too.
    const base = await baseUrl();
    const page = async (path: string) =>
      (await fetch(`${base}/-/status/${path}`, { headers: { authorization: `Bearer ${t.adminToken}` } })).text();
    expect(await page('workers/big-1/')).toContain(
      `<dt>Held for</dt><dd>work request <a href="/-/status/work-requests/${big}/">`,
    );
    expect(await page('workers/big-1/')).toContain(
      'shares 8 CPUs, 16 GiB memory, 100 GiB disk; free 2 CPUs, 10 GiB memory, 97 GiB disk',
    );
    expect(await page(`work-requests/${big}/`)).toContain(
      '<dt>Reserves</dt><dd>2 CPUs (user), 12 GiB memory (user), 1 GiB disk (task-default)',
    );
    const shownByCli = await runCli(`${base}/graphql`, ['work', 'show', big], { token: t.adminToken });
    expect(shownByCli.stdout).toMatch(
      /Resources:\s+2 CPUs \(user\), 12 GiB memory \(user\), 1 GiB disk \(task-default\)/,
    );

    // A small request that leaves room for the big one is backfilled: 0 memory, so it leaves room at any time.
    const tiny = await submit({ cpus: 1, memoryMib: 0, diskMib: 0 });
    expect(await pull(token)).toBe(tiny);
    await finish(tiny, token);

    // Once one more small one ends, the big one fits (2 CPUs, 12 GiB free) and starts; the reservation goes.
    await finish(small[1], token);
    expect(await pull(token)).toBe(big);
    const w3 = await t.gql(WORKER, { n: 'big-1' });
    expect(w3.data!.worker.reservation).toBeNull();
    expect(w3.data!.worker.freeResources).toEqual({ cpus: 2, memoryMib: 0, diskMib: 97 * 1024 });
  });

  it('refuses a figure out of range, naming its path, and writes nothing', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/bad" }) { __typename } }`);
    const before = await t.sql<{ n: number }>(`select count(*)::int as n from work_request`);
    for (const resources of [{ cpus: -1 }, { cpus: 2000 }, { memoryMib: 5 * 1024 * 1024 }]) {
      const r = await t.gql(
        `mutation($r: ResourcesInput) { createWorkRequest(input: { workspace: "debian/bad", taskType: "worker", taskName: "noop", taskData: {}, resources: $r }) {
           ... on WorkRequest { id } ... on Error { code message } } }`,
        { r: resources },
      );
      expect(r.status).toBe(200);
      expect(r.data!.createWorkRequest.code).toBe('INVALID_INPUT');
      expect(r.data!.createWorkRequest.message).toMatch(
        /^input\.resources\.(cpus|memoryMib): must be a whole number from 0 to/,
      );
    }
    const huge = await t.gql(
      `mutation { createWorkRequest(input: { workspace: "debian/bad", taskType: "worker", taskName: "noop", taskData: {}, resources: { cpus: 99999999999 } }) { __typename } }`,
    );
    expect(huge.errors?.length).toBeGreaterThan(0); // not an Int: refused by GraphQL, not a 500
    expect(huge.status).not.toBe(500);
    const after = await t.sql<{ n: number }>(`select count(*)::int as n from work_request`);
    expect(after[0].n).toBe(before[0].n);
  });

  it('sizes a pool whose machines share their resources by packing: 40 two-CPU requests on 16-CPU machines ask for 5', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/pack" }) { __typename } }`);
    // The requests the first test left pending would count too: big-1 has no room for them, so demand sends
    // them to a pool (its free slots serve only what fits its free resources).
    await t.sql(`delete from work_request where status = 'PENDING'`);
    // A noop is expected to take ten minutes, the pools' target latency: the latency asks for no fewer machines than the packing.
    await t.sql(`delete from task_duration`);
    await t.sql(`delete from task_statistics_histogram`);
    await t.sql(
      `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'noop', current_date, 10, 6000)`,
    );
    const specifications = { offersResources: true, cpuCount: 16, memoryGib: 64, diskGib: 200, concurrency: 16 };
    await createPool(t, { name: 'big-hosts', providedTags: ['site:pack'], maxActiveInstances: 20, specifications });
    await createPool(t, {
      name: 'slots',
      providedTags: ['site:slots'],
      maxActiveInstances: 20,
      specifications: { concurrency: 16 },
    });
    const send = async (site: string, resources: Record<string, number>) => {
      const r = await t.gql(
        `mutation($t: [String!], $r: ResourcesInput) { createWorkRequest(input: { workspace: "debian/pack", taskType: "worker", taskName: "noop", taskData: {}, requiredTags: $t, resources: $r }) {
           ... on WorkRequest { id } ... on Error { code message } } }`,
        { t: [site], r: resources },
      );
      expect(r.data!.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
    };
    for (let i = 0; i < 40; i++) await send('site:pack', { cpus: 2, memoryMib: 2048, diskMib: 1024 });
    for (let i = 0; i < 40; i++) await send('site:slots', { cpus: 2, memoryMib: 2048, diskMib: 1024 });
    const DEMAND = `{ provisioningDemand { pools { pool { name } pendingAssigned workersRequired launch
      resourcePlan { machineSize { cpus memoryMib diskMib } requests reserved { cpus memoryMib diskMib } machines unplaceable reason } } } }`;
    const demandOf = async (name: string) =>
      ((await t.gql(DEMAND)).data!.provisioningDemand.pools as { pool: { name: string } }[]).find(
        (p) => p.pool.name === name,
      );
    expect(await demandOf('big-hosts')).toEqual({
      pool: { name: 'big-hosts' },
      pendingAssigned: 40,
      workersRequired: 5,
      launch: 5,
      resourcePlan: {
        machineSize: { cpus: 16, memoryMib: 64 * 1024, diskMib: 200 * 1024 },
        requests: 40,
        reserved: { cpus: 80, memoryMib: 80 * 1024, diskMib: 40 * 1024 },
        machines: 5,
        unplaceable: 0,
        reason:
          '40 requests (80 CPUs, 80 GiB memory, 40 GiB disk) fill 5 machines of 16 CPUs, 64 GiB memory, 200 GiB disk: CPUs fill them first',
      },
    });
    // The pool's page says it too.
    const page = await (
      await fetch(`${await baseUrl()}/-/status/pools/big-hosts/`, {
        headers: { authorization: `Bearer ${t.adminToken}` },
      })
    ).text();
    expect(page).toContain('in resources: 40 requests (80 CPUs, 80 GiB memory, 40 GiB disk) fill 5 machines');
    // The same work on a pool with 16 slots a machine asks for 3 machines and has no plan in resources.
    expect(await demandOf('slots')).toMatchObject({ workersRequired: 3, resourcePlan: null });

    // A request larger than a machine gets no launch, and the plan says so.
    await send('site:pack', { cpus: 32 });
    const plan = (await demandOf('big-hosts')) as unknown as { resourcePlan: { unplaceable: number; reason: string } };
    expect(plan.resourcePlan.unplaceable).toBe(1);
    expect(plan.resourcePlan.reason).toMatch(
      /; 1 larger than a machine \(16 CPUs, 64 GiB memory, 200 GiB disk\) get none$/,
    );
  });

  it('takes figures from workspace and site rules given through createTaskRule; bad figures are refused, nothing written', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/ruled" }) { __typename } }`);
    const RULE = `mutation($i: CreateTaskRuleInput!) { createTaskRule(input: $i) { __typename ... on TaskRule { name resources { cpus memoryMib diskMib } } ... on Error { code message } } }`;
    const site = await t.gql(RULE, {
      i: {
        name: 'big-builds',
        expression: 'task:source-package:libreoffice',
        resources: { memoryMib: 32768, diskMib: 65536 },
      },
    });
    expect(site.data!.createTaskRule).toEqual({
      __typename: 'TaskRule',
      name: 'big-builds',
      resources: { cpus: null, memoryMib: 32768, diskMib: 65536 },
    });
    const ws = await t.gql(RULE, {
      i: { workspace: 'debian/ruled', name: 'wide', taskName: 'noop', resources: { cpus: 4 } },
    });
    expect(ws.data!.createTaskRule.resources).toEqual({ cpus: 4, memoryMib: null, diskMib: null });
    const before = await t.sql<{ n: number }>(`select count(*)::int as n from task_rule`);
    const bad = await t.gql(RULE, { i: { workspace: 'debian/ruled', name: 'bad', resources: { cpus: 5000 } } });
    expect(bad.data!.createTaskRule).toMatchObject({
      code: 'INVALID_RULE',
      message: 'input.resources.cpus: must be a whole number from 0 to 1024',
    });
    const empty = await t.gql(RULE, { i: { workspace: 'debian/ruled', name: 'empty', resources: {} } });
    expect(empty.data!.createTaskRule.message).toBe(
      'input: a rule must add at least one provided or required tag, or resources',
    );
    expect(await t.sql<{ n: number }>(`select count(*)::int as n from task_rule`)).toEqual(before);

    const r = await t.gql(
      `mutation { createWorkRequest(input: { workspace: "debian/ruled", taskType: "worker", taskName: "noop", taskData: {} }) {
         ... on WorkRequest { resources { cpus memoryMib diskMib sources { cpus memoryMib diskMib } } } ... on Error { code message } } }`,
    );
    expect(r.data!.createWorkRequest.resources).toMatchObject({
      cpus: 4,
      sources: { cpus: 'workspace-rule:wide' },
    });
  });
});
