/**
 * What the server runs itself (docs/design.md: server tasks and workflows), through the public API of one app on PostgreSQL, workers
 * pulling with requestWork: synchronization points, workflow expansion, the combined result, abort,
 * and the guarantees under concurrency (one expansion, publish after commit).
 * test/workflows/pipeline.test.ts runs the same with real agents over WebSockets.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { resumeOrchestration } from '../../src/services/workflows/resume-orchestration.js';
import { settleDependents } from '../../src/services/workflows/settle-dependents.js';
import { useTestApp } from '../helpers/app.js';
import {
  connectedWorker,
  createWorkspace,
  ERROR_FIELDS,
  memberOf,
  ok,
  snapshot,
  submit,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp();
type Json = Record<string, any>;

const META = (arch: string) => ({
  architectures: [arch],
  totalPhysicalMemory: 8 * 1024 ** 3,
  executors: ['unshare'],
  tools: ['sbuild', 'autopkgtest'],
  tasks: ['sbuild', 'lintian', 'autopkgtest', 'piuparts', 'noop'].map((name) => ({ type: 'worker', name, version: 1 })),
});

const FIELDS = `id taskName status result statusReason priorityBase priorityAdjustment retryCount workspace { name } createdBy { username } parent { id } dependsOn
  taskData userProvidedTags userRequiredTags requiredTags { tag provenance source } providedTags { tag provenance source }`;
const REQUEST = `query($id: ID!) { workRequest(id: $id) { ${FIELDS} children(first: 50) { edges { node { ${FIELDS} } } pageInfo { hasNextPage } } diagnosis { state } } }`;

async function request(id: string): Promise<Json> {
  return (await ok(t, REQUEST, { id })).workRequest;
}
const childrenOf = (wr: Json): Json[] => wr.children.edges.map((e: Json) => e.node);
const byKey = (children: Json[]) =>
  Object.fromEntries(children.map((c) => [`${c.taskName}:${c.taskData.host_architecture}`, c]));

async function pull(token: string): Promise<string | null> {
  const data = await ok(
    t,
    `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } ... on Error { code message path } } }`,
    {},
    token,
  );
  return data.requestWork.workRequest?.id ?? null;
}
async function lifecycle(
  op: 'startWorkRequest' | 'completeWorkRequest',
  id: string,
  token: string,
  result = 'SUCCESS',
): Promise<Json> {
  const args = op === 'completeWorkRequest' ? `id: $id, result: ${result}` : 'id: $id';
  return (
    await ok(
      t,
      `mutation($id: ID!) { ${op}(input: { ${args} }) { __typename ... on WorkRequest { status } ${ERROR_FIELDS} } }`,
      { id },
      token,
    )
  )[op];
}
/** The worker pulls, starts and completes one request (with the given result); returns its id. */
async function runOne(token: string, result = 'SUCCESS'): Promise<string> {
  const id = await pull(token);
  if (!id) throw new Error('nothing to pull');
  expect(await lifecycle('startWorkRequest', id, token)).toEqual({ __typename: 'WorkRequest', status: 'RUNNING' });
  expect(await lifecycle('completeWorkRequest', id, token, result)).toEqual({
    __typename: 'WorkRequest',
    status: 'COMPLETED',
  });
  return id;
}
const noop = (extra: Json = {}) => ({
  workspace: 'debian/main',
  taskType: 'worker',
  taskName: 'noop',
  taskData: {},
  ...extra,
});
const syncPoint = (dependsOn: string[] = []) => ({
  workspace: 'debian/main',
  taskType: 'internal',
  taskName: 'synchronization_point',
  taskData: { step: 'checked' },
  dependsOn,
});
const pipeline = (extra: Json = {}, data: Json = {}) => ({
  workspace: 'debian/main',
  taskType: 'workflow',
  taskName: 'debian_pipeline',
  taskData: {
    source_package: 'hello',
    vendor: 'debian',
    codename: 'trixie',
    architectures: ['amd64', 'arm64'],
    ...data,
  },
  ...extra,
});
async function statuses(ids: string[]): Promise<string[]> {
  const rows = await t.sql<{ id: number; status: string; result: string | null }>(
    `select id, status, result from work_request where id = any(?::int[])`,
    [`{${ids.join(',')}}`],
  );
  return ids
    .map((id) => rows.find((r) => String(r.id) === id))
    .map((r) => `${r!.status}${r!.result ? `/${r!.result}` : ''}`);
}

let alice: string;
let amd: string;
let arm: string;
const environments: Record<string, string> = {};

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  alice = await memberOf(t, 'debian/main', 'alice');
  for (const arch of ['amd64', 'arm64']) {
    const r = await ok(
      t,
      `mutation($a: String!) { createEnvironment(input: { codename: "trixie", architecture: $a }) { ... on Environment { id } } }`,
      { a: arch },
    );
    environments[arch] = r.createEnvironment.id;
  }
});

beforeEach(async () => {
  // A clean queue and two fresh workers (users, their tokens and the environments stay).
  for (const sql of [
    'delete from work_request_dependency',
    'delete from work_request',
    'delete from token where worker_id is not null',
    'delete from worker',
  ])
    await t.sql(sql);
  amd = await connectedWorker(t, 'amd', {}, META('amd64'));
  arm = await connectedWorker(t, 'arm', {}, META('arm64'));
});

describe('synchronization points complete as soon as their dependencies have completed', () => {
  it('with nothing to wait for: COMPLETED with SUCCESS at its creation', async () => {
    const created = await submitOk(t, syncPoint(), alice);
    expect(await statuses([created.id])).toEqual(['COMPLETED/SUCCESS']);
    expect((await request(created.id)).diagnosis).toEqual({ state: 'ORCHESTRATED' });
  });

  it.each([
    { name: 'a dependency that succeeded', result: 'SUCCESS' },
    {
      name: 'a dependency that failed (a completed dependency releases its dependents, whatever its result)',
      result: 'FAILURE',
    },
  ])(
    'after $name: in the transaction that completes it, and its own dependents are released; published after the commit',
    async ({ result }) => {
      const a = (await submitOk(t, noop(), alice)).id;
      const s = (await submitOk(t, syncPoint([a]), alice)).id;
      const b = (await submitOk(t, noop({ dependsOn: [s] }), alice)).id;
      expect(await statuses([s, b])).toEqual(['BLOCKED', 'BLOCKED']);

      // Every event about them, with the status a fresh read finds when it arrives.
      const events = t.app.events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
      const seen: string[] = [];
      const reading = (async () => {
        for (let next = await events.next(); !next.done; next = await events.next()) {
          const id = String(next.value.id);
          if (id === s || id === b) seen.push(`${id}:${(await statuses([id]))[0]}`);
          if (seen.length === 2) return;
        }
      })();
      expect(await pull(amd)).toBe(a);
      await lifecycle('startWorkRequest', a, amd);
      await lifecycle('completeWorkRequest', a, amd, result);
      expect(await statuses([a, s, b])).toEqual([`COMPLETED/${result}`, 'COMPLETED/SUCCESS', 'PENDING']);
      await reading;
      await events.return?.();
      expect(seen.sort()).toEqual([`${s}:COMPLETED/SUCCESS`, `${b}:PENDING`].sort());
    },
  );

  it('after an aborted dependency: ABORTED, as any dependent, and so are its dependents', async () => {
    const a = (await submitOk(t, noop(), alice)).id;
    const s = (await submitOk(t, syncPoint([a]), alice)).id;
    const b = (await submitOk(t, noop({ dependsOn: [s] }), alice)).id;
    await ok(t, `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename } }`, { id: a }, alice);
    expect(await statuses([a, s, b])).toEqual(['ABORTED', 'ABORTED', 'ABORTED']);
  });
});

describe('workflows', () => {
  it('are refused at submission, with nothing written, when their children could not be made', async () => {
    const before = await snapshot(t, ['work_request', 'work_request_dependency']);
    const r = await submit(t, pipeline({}, { architectures: ['amd64', 's390x'] }), alice);
    expect(r).toMatchObject({
      __typename: 'InputError',
      code: 'UNKNOWN_ENVIRONMENT',
      path: 'input.taskData.architectures',
      message: expect.stringContaining('architecture s390x'),
    });
    const unknownKey = await submit(t, pipeline({}, { enable_upload: true }), alice);
    expect(unknownKey).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_TASK_DATA',
      path: 'input.taskData.enable_upload',
    });
    expect(await snapshot(t, ['work_request', 'work_request_dependency'])).toEqual(before);
  });

  it('debian_pipeline: RUNNING at once, with its children, which inherit workspace, creator, priority and user tags, and are tagged by the normal analysis with the workflow as source', async () => {
    const created = await submitOk(
      t,
      pipeline({ priorityBase: 5, priorityAdjustment: 3, requiredTags: ['worker:memory-gib>=1'] }),
      undefined,
    ); // admin: a positive adjustment
    const wf = await request(created.id);
    expect(wf).toMatchObject({ status: 'RUNNING', parent: null, diagnosis: { state: 'ORCHESTRATED' } });
    const children = childrenOf(wf);
    expect(children.map((c) => `${c.taskName}:${c.taskData.host_architecture}:${c.status}`)).toEqual([
      'sbuild:amd64:PENDING',
      'sbuild:arm64:PENDING',
      'lintian:amd64:BLOCKED',
      'autopkgtest:amd64:BLOCKED',
      'piuparts:amd64:BLOCKED',
      'lintian:arm64:BLOCKED',
      'autopkgtest:arm64:BLOCKED',
      'piuparts:arm64:BLOCKED',
    ]);
    const k = byKey(children);
    for (const c of children) {
      expect(c).toMatchObject({
        workspace: { name: 'debian/main' },
        createdBy: { username: 'admin' },
        priorityBase: 5,
        priorityAdjustment: 3,
        parent: { id: created.id },
        userProvidedTags: [],
        userRequiredTags: ['worker:memory-gib>=1'],
      });
      // Frozen when it becomes PENDING: the builds now, the checks when their build completes.
      if (c.status === 'PENDING')
        expect(c.requiredTags).toContainEqual({
          tag: 'worker:memory-gib>=1',
          provenance: 'USER',
          source: 'user-input',
        });
      else expect(c.requiredTags).toEqual([]);
    }
    expect(k['lintian:arm64'].dependsOn).toEqual([k['sbuild:arm64'].id]);
    expect(k['piuparts:amd64'].dependsOn).toEqual([k['sbuild:amd64'].id]);
    expect(k['sbuild:arm64'].taskData).toEqual({
      source_package: 'hello',
      host_architecture: 'arm64',
      environment_id: Number(environments.arm64),
      build_components: ['any'],
      backend: 'auto',
    });
    // Tags of the data the workflow wrote name it; the others keep their own sources.
    const source = `workflow:${created.id}`;
    expect(k['sbuild:arm64'].requiredTags).toEqual(
      expect.arrayContaining([
        { tag: 'worker:build-arch:arm64', provenance: 'SYSTEM', source },
        { tag: 'worker:executor:unshare', provenance: 'SYSTEM', source },
        { tag: 'worker:cap:sbuild', provenance: 'SYSTEM', source: 'task-registry' },
        { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'task-registry' },
      ]),
    );
    expect(k['sbuild:arm64'].providedTags).toContainEqual({
      tag: 'task:source-package:hello',
      provenance: 'SYSTEM',
      source,
    });
    // The BLOCKED ones get theirs when their build completes, the same way.
    await runOne(arm);
    const lintian = await request(k['lintian:arm64'].id);
    expect(lintian.status).toBe('PENDING');
    expect(lintian.requiredTags).toContainEqual({ tag: 'worker:build-arch:arm64', provenance: 'SYSTEM', source });
  });

  it('runs to SUCCESS when every child succeeds, and only then releases its own dependents', async () => {
    const wf = (await submitOk(t, pipeline({}, { architectures: ['amd64'] }), alice)).id;
    const after = (await submitOk(t, noop({ dependsOn: [wf] }), alice)).id;
    const ran: string[] = [];
    for (let i = 0; i < 4; i++) ran.push(await runOne(amd));
    expect(ran).toEqual(childrenOf(await request(wf)).map((c) => c.id)); // the build first, then its checks
    expect(await statuses([wf, after])).toEqual(['COMPLETED/SUCCESS', 'PENDING']);
    expect((await request(wf)).statusReason).toBeNull();
  });

  it('ends FAILURE when a child fails; the failed build still releases its checks, as any completed dependency', async () => {
    const wf = (
      await submitOk(
        t,
        pipeline({}, { architectures: ['amd64'], enable_autopkgtest: false, enable_piuparts: false }),
        alice,
      )
    ).id;
    const after = (await submitOk(t, noop({ dependsOn: [wf] }), alice)).id;
    const build = await runOne(amd, 'FAILURE');
    const lintian = await runOne(amd);
    expect(await statuses([build, lintian, wf, after])).toEqual([
      'COMPLETED/FAILURE',
      'COMPLETED/SUCCESS',
      'COMPLETED/FAILURE',
      'PENDING',
    ]);
    expect((await request(wf)).statusReason).toBe(`1 of 2 children did not succeed: ${build} (sbuild) FAILURE`);
  });

  it('ends ERROR when a child errs or is aborted, even if another failed', async () => {
    const wf = (
      await submitOk(
        t,
        pipeline({}, { enable_lintian: false, enable_autopkgtest: false, enable_piuparts: false }),
        alice,
      )
    ).id;
    const [amdBuild, armBuild] = childrenOf(await request(wf)).map((c) => c.id);
    await runOne(amd, 'FAILURE');
    await ok(t, `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename } }`, { id: armBuild }, alice);
    expect(await statuses([amdBuild, armBuild, wf])).toEqual(['COMPLETED/FAILURE', 'ABORTED', 'COMPLETED/ERROR']);
  });

  it('aborting it aborts every child that has not finished (the assigned one too: its worker is refused) and its dependents', async () => {
    const wf = (await submitOk(t, pipeline(), alice)).id;
    const after = (await submitOk(t, noop({ dependsOn: [wf] }), alice)).id;
    const done = await runOne(amd); // the amd64 build
    const held = await pull(arm); // the arm64 build, assigned
    const r = await ok(
      t,
      `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { status statusReason } } }`,
      { id: wf },
      alice,
    );
    expect(r.abortWorkRequest).toEqual({
      __typename: 'WorkRequest',
      status: 'ABORTED',
      statusReason: 'aborted by alice',
    });
    const children = childrenOf(await request(wf));
    expect(children.filter((c) => c.id !== done).map((c) => [c.status, c.statusReason])).toEqual(
      children.slice(1).map(() => ['ABORTED', `workflow ${wf} was aborted by alice`]),
    );
    expect(await statuses([done, after])).toEqual(['COMPLETED/SUCCESS', 'ABORTED']);
    expect(await lifecycle('startWorkRequest', held!, arm)).toMatchObject({
      __typename: 'InvalidStateError',
      code: 'INVALID_STATE',
    });
    expect(await pull(amd)).toBeNull();
    expect(await pull(arm)).toBeNull();
  });

  it('is completed by the server only: an admin cannot complete it by hand', async () => {
    const wf = (await submitOk(t, pipeline(), alice)).id;
    const r = await ok(
      t,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ${ERROR_FIELDS} } }`,
      { id: wf },
    );
    expect(r.completeWorkRequest).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
    expect(await statuses([wf])).toEqual(['RUNNING']);
  });

  it('a BLOCKED workflow expands when its dependencies complete; if its children cannot be made by then, it is ABORTED with the reason and has none', async () => {
    const a = (await submitOk(t, noop(), alice)).id;
    const b = (await submitOk(t, noop(), alice)).id;
    const ok1 = (await submitOk(t, pipeline({ dependsOn: [a] }, { architectures: ['amd64'] }), alice)).id;
    const broken = (await submitOk(t, pipeline({ dependsOn: [b] }, { architectures: ['arm64'] }), alice)).id;
    expect(childrenOf(await request(ok1))).toEqual([]);
    await runOne(amd); // a
    expect(childrenOf(await request(ok1))).toHaveLength(4);
    expect(await statuses([ok1])).toEqual(['RUNNING']);
    // The arm64 environment goes away (by hand) before b completes.
    const [env] = await t.sql<Json>(`select * from environment where id = ?`, [Number(environments.arm64)]);
    await t.sql(`delete from environment where id = ?`, [env.id]);
    try {
      await runOne(amd); // b
      const wr = await request(broken);
      expect(wr).toMatchObject({
        status: 'ABORTED',
        statusReason: expect.stringMatching(
          /^could not expand the workflow: no environment of codename trixie for architecture arm64/,
        ),
      });
      expect(childrenOf(wr)).toEqual([]);
    } finally {
      await t.sql(
        `insert into environment (id, codename, architecture, variant, backend, image_format, created_at) values (?, ?, ?, ?, ?, ?, ?)`,
        [env.id, env.codename, env.architecture, env.variant, env.backend, env.image_format, env.created_at],
      );
    }
  });

  it('expands once even when two transactions settle its last dependency at the same time', async () => {
    const a = (await submitOk(t, noop(), alice)).id;
    const wf = (await submitOk(t, pipeline({ dependsOn: [a] }, { architectures: ['amd64'] }), alice)).id;
    // a completes; its dependents are not settled yet (as if the completion's settling were still to run).
    await t.sql(`update work_request set status = 'COMPLETED', result = 'SUCCESS', completed_at = now() where id = ?`, [
      Number(a),
    ]);
    const first = t.app.orm.em.fork();
    await first.begin();
    await settleDependents(first, t.app.config, [Number(a)]); // expands, and holds the workflow's row
    const second = t.app.orm.em.fork();
    const racing = second.transactional((tx) => settleDependents(tx, t.app.config, [Number(a)]));
    const [{ datname }] = await t.sql<{ datname: string }>(`select current_database() as datname`);
    for (let waiting = 0; waiting === 0;) {
      [{ waiting }] = await t.sql<{ waiting: number }>(
        `select count(*)::int as waiting from pg_stat_activity where datname = ? and wait_event_type = 'Lock'`,
        [datname],
      );
    }
    await first.commit();
    expect(await racing).toEqual([]); // it found the workflow expanded already, and changed nothing
    expect(childrenOf(await request(wf))).toHaveLength(4);
  });

  it('pages its children, for many workflows at once', async () => {
    const one = (await submitOk(t, pipeline(), alice)).id;
    const two = (await submitOk(t, pipeline({}, { architectures: ['arm64'] }), alice)).id;
    const page = `query($after: String) { workRequests(filter: { taskName: "debian_pipeline" }) { edges { node { id children(first: 3, after: $after) { edges { node { id parent { id } } cursor } pageInfo { hasNextPage endCursor } } } } } }`;
    const data = await ok(t, page, {});
    const lists = Object.fromEntries(data.workRequests.edges.map((e: Json) => [e.node.id, e.node.children]));
    expect(lists[one].edges).toHaveLength(3);
    expect(lists[one].pageInfo.hasNextPage).toBe(true);
    expect(lists[two].edges).toHaveLength(3);
    expect(lists[two].pageInfo.hasNextPage).toBe(true);
    for (const [id, list] of Object.entries(lists) as [string, Json][])
      for (const e of list.edges) expect(e.node.parent).toEqual({ id });
    // The rest of the first one, after its cursor.
    const rest = (
      await ok(
        t,
        `query($id: ID!, $after: String) { workRequest(id: $id) { children(first: 50, after: $after) { edges { node { id } } pageInfo { hasNextPage } } } }`,
        {
          id: one,
          after: lists[one].pageInfo.endCursor,
        },
      )
    ).workRequest.children;
    expect(rest.pageInfo.hasNextPage).toBe(false);
    expect([...lists[one].edges, ...rest.edges].map((e: Json) => e.node.id)).toEqual(
      childrenOf(await request(one)).map((c) => c.id),
    );
  });

  it('a workflow or synchronization point an older version left PENDING is run at start-up', async () => {
    const a = (await submitOk(t, noop(), alice)).id;
    const wf = (await submitOk(t, pipeline({ dependsOn: [a] }, { architectures: ['amd64'] }), alice)).id;
    const s = (await submitOk(t, syncPoint([a]), alice)).id;
    // What tagsched did before: the dependency completed, the orchestrated requests became PENDING and stayed.
    await t.sql(`update work_request set status = 'COMPLETED', result = 'SUCCESS' where id = ?`, [Number(a)]);
    await t.sql(`update work_request set status = 'PENDING', pending_at = now() where id = any(?::int[])`, [
      `{${wf},${s}}`,
    ]);
    const changed = await resumeOrchestration(t.app.orm.em.fork(), t.app.config);
    expect(changed.map((c) => String(c.id))).toEqual(expect.arrayContaining([wf, s]));
    expect(await statuses([wf, s])).toEqual(['RUNNING', 'COMPLETED/SUCCESS']);
    expect(childrenOf(await request(wf))).toHaveLength(4);
    expect(await resumeOrchestration(t.app.orm.em.fork(), t.app.config)).toEqual([]);
  });
});
