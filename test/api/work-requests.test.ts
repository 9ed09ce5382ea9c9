import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  ERROR_FIELDS,
  WORK_REQUEST_FIELDS,
  connectedWorker,
  createUser,
  createWorkspace,
  expectResult,
  memberOf,
  ok,
  sbuild,
  snapshot,
  submit,
  submitOk,
  tagsOf,
} from '../helpers/fixtures.js';

const t = useTestApp();

type Entry = { tag: string; provenance: string; source: string };

const abort = (id: string, token?: string) =>
  ok(
    t,
    `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { ${WORK_REQUEST_FIELDS} } ${ERROR_FIELDS} } }`,
    { id },
    token,
  ).then((d) => d.abortWorkRequest);
const addDependencies = (id: string, dependsOn: string[]) =>
  ok(
    t,
    `mutation($id: ID!, $d: [ID!]!) { addWorkRequestDependencies(input: { id: $id, dependsOn: $d }) { __typename ... on WorkRequest { id status dependsOn } ${ERROR_FIELDS} } }`,
    {
      id,
      d: dependsOn,
    },
  ).then((d) => d.addWorkRequestDependencies);
const fetchRequest = async (id: string) =>
  (await ok(t, `query($id: ID!) { workRequest(id: $id) { ${WORK_REQUEST_FIELDS} } }`, { id })).workRequest;

let alice: string;

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  alice = await memberOf(t, 'debian/main', 'alice');
});

describe('createWorkRequest', () => {
  it('computes and freezes both tag sets, with the priority and the creator', async () => {
    const wr = await submitOk(
      t,
      sbuild('debian/main', 'hello', { priorityBase: 5, requiredTags: ['worker:memory-gib>=16'] }),
      alice,
    );
    expect(wr).toMatchObject({
      status: 'PENDING',
      taskName: 'sbuild',
      workspace: { name: 'debian/main' },
      createdBy: { username: 'alice' },
      dependsOn: [],
      droppedTags: [],
    });
    expect(wr.requiredTags).toContainEqual({ tag: 'worker:memory-gib>=16', provenance: 'USER', source: 'user-input' });
    expect(wr.requiredTags).toContainEqual({
      tag: 'worker:build-arch:amd64',
      provenance: 'SYSTEM',
      source: 'task-data:host_architecture',
    });
    const full = await ok(
      t,
      'query($id: ID!) { workRequest(id: $id) { priority priorityBase priorityAdjustment pendingAt taskData userRequiredTags userProvidedTags retryCount worker { name } } }',
      {
        id: wr.id,
      },
    );
    expect(full.workRequest).toMatchObject({
      priority: 5,
      priorityBase: 5,
      priorityAdjustment: 0,
      taskData: { source_package: 'hello', host_architecture: 'amd64', backend: 'auto' },
      userRequiredTags: ['worker:memory-gib>=16'],
      userProvidedTags: [],
      retryCount: 0,
      worker: null,
    });
    expect(full.workRequest.pendingAt).not.toBeNull();
    const [row] = await t.sql<{ required_tags: string[]; provided_tags: string[] }>(
      'select required_tags, provided_tags from work_request where id = ?',
      [Number(wr.id)],
    );
    expect([...row.required_tags].sort()).toEqual([...new Set(tagsOf(wr.requiredTags))].sort());
    expect([...row.provided_tags].sort()).toEqual([...new Set(tagsOf(wr.providedTags))].sort());
  });

  it('lets an admin raise the priority', async () => {
    const wr = await submitOk(t, sbuild('debian/main', 'hello', { priorityBase: 1, priorityAdjustment: 10 }));
    expect(
      (
        await ok(t, 'query($id: ID!) { workRequest(id: $id) { priority createdBy { username isAdmin } } }', {
          id: wr.id,
        })
      ).workRequest,
    ).toEqual({
      priority: 11,
      createdBy: { username: 'admin', isAdmin: true },
    });
  });

  it('lets a user lower the priority', async () => {
    const wr = await submitOk(t, sbuild('debian/main', 'hello', { priorityAdjustment: -3 }), alice);
    expect(
      (await ok(t, 'query($id: ID!) { workRequest(id: $id) { priority } }', { id: wr.id })).workRequest.priority,
    ).toBe(-3);
  });

  it('makes internal and workflow tasks require a not-assignable worker', async () => {
    const wr = await submitOk(
      t,
      { workspace: 'debian/main', taskType: 'internal', taskName: 'synchronization_point', taskData: { step: 'x' } },
      alice,
    );
    expect(tagsOf(wr.requiredTags)).toEqual(['worker:type:not-assignable']);
  });
});

describe('environments', () => {
  let arm64: string;
  beforeAll(async () => {
    const env = await expectResult(
      t,
      'Environment',
      `mutation { createEnvironment(input: { codename: "trixie", architecture: "arm64", variant: "sbuild", backend: "unshare", imageFormat: "tarball" }) {
        __typename ... on Environment { id codename architecture variant backend imageFormat } ${ERROR_FIELDS} } }`,
    );
    expect(env).toMatchObject({
      codename: 'trixie',
      architecture: 'arm64',
      variant: 'sbuild',
      backend: 'unshare',
      imageFormat: 'tarball',
    });
    arm64 = env.id;
  });

  it('are listed', async () => {
    expect((await ok(t, '{ environments { id codename architecture } }')).environments).toEqual([
      { id: arm64, codename: 'trixie', architecture: 'arm64' },
    ]);
  });

  it.each([
    ['an unknown backend', { codename: 'trixie', architecture: 'amd64', backend: 'docker' }, 'input.backend'],
    ['a bad architecture', { codename: 'trixie', architecture: 'AMD 64' }, 'input.architecture'],
  ])('refuses %s', async (_label, input, path) => {
    const before = await snapshot(t, ['environment']);
    const r = await ok(
      t,
      `mutation($i: CreateEnvironmentInput!) { createEnvironment(input: $i) { __typename ${ERROR_FIELDS} } }`,
      { i: input },
    );
    expect(r.createEnvironment).toMatchObject({ code: 'INVALID_INPUT', path });
    expect(await snapshot(t, ['environment'])).toEqual(before);
  });

  it.each([
    ['no host architecture: the environment pins the architecture', {}, []],
    ['the same host architecture: not a cross build', { host_architecture: 'arm64' }, []],
    ['another host architecture: a cross build', { host_architecture: 'amd64' }, ['task:cross-target:amd64']],
  ])('%s', async (_label, extra, crossTargets) => {
    const wr = await submitOk(
      t,
      {
        workspace: 'debian/main',
        taskType: 'worker',
        taskName: 'lintian',
        taskData: { environment_id: Number(arm64), ...extra },
      },
      alice,
    );
    expect(wr.requiredTags).toContainEqual({
      tag: 'worker:build-arch:arm64',
      provenance: 'SYSTEM',
      source: `environment:${arm64}`,
    });
    expect(tagsOf(wr.requiredTags).filter((tag) => tag.startsWith('worker:build-arch:'))).toEqual([
      'worker:build-arch:arm64',
    ]);
    expect(wr.providedTags.filter((e: Entry) => e.tag.startsWith('task:cross-target:'))).toEqual(
      crossTargets.map((tag) => ({ tag, provenance: 'SYSTEM', source: 'task-data:host_architecture' })),
    );
  });
});

describe('groups', () => {
  let groupId: string;
  beforeAll(async () => {
    await createUser(t, 'bob');
    await createWorkspace(t, 'debian/qa');
  });

  it('a creator in a scope group provides task:group:SCOPE::GROUP', async () => {
    const g = await expectResult(
      t,
      'Group',
      `mutation { createGroup(input: { scope: "debian", name: "Debian" }) { __typename ... on Group { id name scope workspace { name } members { username } } ${ERROR_FIELDS} } }`,
    );
    expect(g).toMatchObject({ name: 'Debian', scope: 'debian', workspace: null, members: [] });
    groupId = g.id;
    const added = await expectResult(
      t,
      'Group',
      `mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["alice", "bob"] }) { __typename ... on Group { name scope members { username } } ${ERROR_FIELDS} } }`,
      { g: groupId },
    );
    // The answer is the whole group (its scope was once left unloaded: a 500).
    expect(added).toMatchObject({
      name: 'Debian',
      scope: 'debian',
      members: [{ username: 'alice' }, { username: 'bob' }],
    });

    const wr = await submitOk(t, sbuild('debian/main'), alice);
    expect(wr.providedTags).toContainEqual({
      tag: 'task:group:debian::Debian',
      provenance: 'SYSTEM',
      source: 'group:Debian',
    });
  });

  it('a group tied to a workspace names it; groups of other scopes do not count', async () => {
    const g = await expectResult(
      t,
      'Group',
      `mutation { createGroup(input: { scope: "debian", name: "QA", workspace: "debian/qa" }) { __typename ... on Group { id workspace { name } } } }`,
    );
    expect(g.workspace).toEqual({ name: 'debian/qa' });
    await ok(t, 'mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["alice"] }) { __typename } }', {
      g: g.id,
    });
    const other = await expectResult(
      t,
      'Group',
      `mutation { createGroup(input: { scope: "ubuntu", name: "Core" }) { __typename ... on Group { id } } }`,
    );
    await ok(t, 'mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["alice"] }) { __typename } }', {
      g: other.id,
    });

    const wr = await submitOk(t, sbuild('debian/main'), alice);
    expect(
      tagsOf(wr.providedTags)
        .filter((tag) => tag.startsWith('task:group:'))
        .sort(),
    ).toEqual(['task:group:debian::Debian', 'task:group:debian:qa:QA']);
  });

  it('are listed per scope with their members', async () => {
    const r = await ok(t, '{ groups(scope: "debian") { name workspace { name } members { username } } }');
    expect(r.groups).toEqual([
      { name: 'Debian', workspace: null, members: [{ username: 'alice' }, { username: 'bob' }] },
      { name: 'QA', workspace: { name: 'debian/qa' }, members: [{ username: 'alice' }] },
    ]);
    expect((await ok(t, '{ groups(scope: "nowhere") { name } }')).groups).toEqual([]);
  });

  it.each([
    [
      'a taken name',
      'mutation { createGroup(input: { scope: "debian", name: "Debian" }) { __typename ' + ERROR_FIELDS + ' } }',
      'ALREADY_EXISTS',
    ],
    [
      'a workspace of another scope',
      'mutation { createGroup(input: { scope: "ubuntu", name: "X", workspace: "debian/qa" }) { __typename ' +
        ERROR_FIELDS +
        ' } }',
      'NOT_FOUND',
    ],
  ])('createGroup refuses %s', async (_label, mutation, code) => {
    const before = await snapshot(t, ['user_group', 'scope']);
    expect(Object.values(await ok(t, mutation))[0]).toMatchObject({ code });
    expect(await snapshot(t, ['user_group', 'scope'])).toEqual(before);
  });

  it('addGroupMembers refuses unknown users and adds none', async () => {
    const before = await snapshot(t, ['user_group_member']);
    const r = await ok(
      t,
      `mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["bob", "nobody"] }) { __typename ${ERROR_FIELDS} } }`,
      { g: groupId },
    );
    expect(r.addGroupMembers).toMatchObject({ code: 'NOT_FOUND', path: 'input.usernames' });
    expect(r.addGroupMembers.message).toContain('nobody');
    expect(await snapshot(t, ['user_group_member'])).toEqual(before);
  });
});

describe('task rules', () => {
  let owner: string;
  beforeAll(async () => {
    await createWorkspace(t, 'rules/kernel');
    await createWorkspace(t, 'rules/other');
    owner = await memberOf(t, 'rules/kernel', 'kernel-owner', 'OWNER');
  });

  const RULE_MUTATION = `mutation($i: CreateTaskRuleInput!) { createTaskRule(input: $i) {
    __typename ... on TaskRule { name workspace { name } taskName expression providedTags requiredTags } ${ERROR_FIELDS} } }`;

  it('a site rule requiring worker:class:large applies to linux and libreoffice, not to hello', async () => {
    const rule = await expectResult(t, 'TaskRule', RULE_MUTATION, {
      i: {
        name: 'large-packages',
        expression: 'task:source-package:linux or task:source-package:libreoffice',
        requiredTags: ['worker:class:large'],
      },
    });
    expect(rule).toMatchObject({
      name: 'large-packages',
      workspace: null,
      taskName: null,
      requiredTags: ['worker:class:large'],
      providedTags: [],
    });
    expect((await ok(t, '{ siteRules { name expression requiredTags } }')).siteRules).toEqual([
      {
        name: 'large-packages',
        expression: 'task:source-package:linux or task:source-package:libreoffice',
        requiredTags: ['worker:class:large'],
      },
    ]);

    const large = { tag: 'worker:class:large', provenance: 'SYSTEM', source: 'site-rule:large-packages' };
    for (const pkg of ['linux', 'libreoffice']) {
      expect((await submitOk(t, sbuild('rules/kernel', pkg), owner)).requiredTags).toContainEqual(large);
    }
    const hello = await submitOk(t, sbuild('rules/kernel', 'hello'), owner);
    expect(tagsOf(hello.requiredTags)).not.toContain('worker:class:large');
  });

  it('a workspace rule adding provided task:scope:other has it dropped (and listed) while its required tag stays', async () => {
    const rule = await expectResult(
      t,
      'TaskRule',
      RULE_MUTATION,
      {
        i: {
          workspace: 'rules/kernel',
          name: 'sneaky',
          providedTags: ['task:scope:other', 'site:kernel-team'],
          requiredTags: ['site:kernel-builder'],
        },
      },
      owner,
    );
    expect(rule.workspace).toEqual({ name: 'rules/kernel' });

    const wr = await submitOk(t, sbuild('rules/kernel', 'hello'), owner);
    expect(tagsOf(wr.providedTags)).not.toContain('task:scope:other');
    expect(wr.providedTags).toContainEqual({ tag: 'task:scope:rules', provenance: 'SYSTEM', source: 'workspace' });
    expect(wr.providedTags).toContainEqual({
      tag: 'site:kernel-team',
      provenance: 'WORKSPACE',
      source: 'workspace-rule:sneaky',
    });
    expect(wr.requiredTags).toContainEqual({
      tag: 'site:kernel-builder',
      provenance: 'WORKSPACE',
      source: 'workspace-rule:sneaky',
    });
    expect(wr.droppedTags).toEqual([
      expect.objectContaining({
        tag: 'task:scope:other',
        provenance: 'WORKSPACE',
        source: 'workspace-rule:sneaky',
        set: 'TASK_PROVIDED',
        code: 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY',
      }),
    ]);
    expect(wr.droppedTags[0].reason).toContain('task:scope:other');

    // Only that workspace's requests get it.
    const elsewhere = await submitOk(t, sbuild('rules/other', 'hello'));
    expect(tagsOf(elsewhere.requiredTags)).not.toContain('site:kernel-builder');
    expect(elsewhere.droppedTags).toEqual([]);
  });

  it('a rule for one task name leaves other tasks alone; the workspace lists its rules', async () => {
    await expectResult(t, 'TaskRule', RULE_MUTATION, {
      i: { workspace: 'rules/other', name: 'lintian-only', taskName: 'lintian', requiredTags: ['site:lint-box'] },
    });
    const lintian = await submitOk(t, {
      workspace: 'rules/other',
      taskType: 'worker',
      taskName: 'lintian',
      taskData: {},
    });
    expect(lintian.requiredTags).toContainEqual({
      tag: 'site:lint-box',
      provenance: 'WORKSPACE',
      source: 'workspace-rule:lintian-only',
    });
    expect(tagsOf((await submitOk(t, sbuild('rules/other'))).requiredTags)).not.toContain('site:lint-box');
    const { workspaces } = await ok(t, '{ workspaces { name rules { name taskName requiredTags } } }');
    expect(workspaces.find((w: { name: string }) => w.name === 'rules/other').rules).toEqual([
      { name: 'lintian-only', taskName: 'lintian', requiredTags: ['site:lint-box'] },
    ]);
  });

  it.each([
    [
      'an expression that does not parse',
      { name: 'r1', expression: 'task:a and (', requiredTags: ['x:y'] },
      null,
      { code: 'INVALID_RULE', path: 'input.expression' },
    ],
    ['a rule that adds nothing', { name: 'r2', expression: 'task:a' }, null, { code: 'INVALID_RULE' }],
    [
      'an invalid tag',
      { name: 'r3', requiredTags: ['fine:tag', 'not fine'] },
      null,
      { code: 'INVALID_TAG', path: 'input.requiredTags[1]', tag: 'not fine' },
    ],
    [
      'a taken name',
      { name: 'large-packages', requiredTags: ['x:y'] },
      null,
      { code: 'INVALID_RULE', path: 'input.name' },
    ],
    ['a site rule by a workspace owner', { name: 'r4', requiredTags: ['x:y'] }, 'owner', { code: 'FORBIDDEN' }],
    [
      'a workspace rule by a non-owner',
      { workspace: 'rules/kernel', name: 'r5', requiredTags: ['x:y'] },
      'alice',
      { code: 'FORBIDDEN' },
    ],
    ['an anonymous caller', { name: 'r6', requiredTags: ['x:y'] }, 'anonymous', { code: 'UNAUTHENTICATED' }],
  ])('createTaskRule refuses %s and writes nothing', async (_label, input, who, expected) => {
    const token = who === 'owner' ? owner : who === 'alice' ? alice : who === 'anonymous' ? null : undefined;
    const before = await snapshot(t, ['task_rule']);
    const r = await ok(t, RULE_MUTATION, { i: input }, token);
    expect(r.createTaskRule).toMatchObject(expected);
    expect(await snapshot(t, ['task_rule'])).toEqual(before);
  });
});

describe('dependencies', () => {
  it('a request depending on an unfinished one waits BLOCKED, untagged', async () => {
    const a = await submitOk(t, sbuild('debian/main'), alice);
    const b = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [a.id] }), alice);
    expect(b).toMatchObject({ status: 'BLOCKED', dependsOn: [a.id], providedTags: [], requiredTags: [] });
    const [row] = await t.sql<{ pending_at: Date | null }>('select pending_at from work_request where id = ?', [
      Number(b.id),
    ]);
    expect(row.pending_at).toBeNull();
  });

  it('a request whose dependencies all completed is PENDING at once', async () => {
    const a = await submitOk(t, sbuild('debian/main'), alice);
    await t.sql(`update work_request set status = 'COMPLETED', result = 'SUCCESS' where id = ?`, [Number(a.id)]);
    const b = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [a.id] }), alice);
    expect(b.status).toBe('PENDING');
    expect(b.requiredTags.length).toBeGreaterThan(0);
  });

  it('aborting a request aborts its dependents, transitively', async () => {
    const a = await submitOk(t, sbuild('debian/main'), alice);
    const b = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [a.id] }), alice);
    const c = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [b.id] }), alice);
    const unrelated = await submitOk(t, sbuild('debian/main'), alice);

    const aborted = await abort(a.id, alice);
    expect(aborted).toMatchObject({
      __typename: 'WorkRequest',
      id: a.id,
      status: 'ABORTED',
      statusReason: 'aborted by alice',
    });
    expect(await fetchRequest(b.id)).toMatchObject({
      status: 'ABORTED',
      statusReason: `dependency ${a.id} was aborted`,
    });
    expect(await fetchRequest(c.id)).toMatchObject({
      status: 'ABORTED',
      statusReason: `dependency ${b.id} was aborted`,
    });
    expect((await fetchRequest(unrelated.id)).status).toBe('PENDING');
    const rows = await t.sql<{ completed_at: Date | null }>(
      'select completed_at from work_request where id in (?, ?, ?)',
      [Number(a.id), Number(b.id), Number(c.id)],
    );
    expect(rows.every((r) => r.completed_at !== null)).toBe(true);

    const again = await abort(a.id, alice);
    expect(again).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
  });

  it('a dependency on an aborted request is refused', async () => {
    const a = await submitOk(t, sbuild('debian/main'), alice);
    await abort(a.id, alice);
    const before = await snapshot(t, ['work_request', 'work_request_dependency']);
    const r = await submit(t, sbuild('debian/main', 'hello', { dependsOn: [a.id] }), alice);
    expect(r).toMatchObject({ code: 'UNKNOWN_DEPENDENCY', path: 'input.dependsOn' });
    expect(await snapshot(t, ['work_request', 'work_request_dependency'])).toEqual(before);
  });

  it('addWorkRequestDependencies adds to a BLOCKED request and refuses a cycle', async () => {
    const p = await submitOk(t, sbuild('debian/main'), alice);
    const q = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [p.id] }), alice);
    const r = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [q.id] }), alice);
    const s = await submitOk(t, sbuild('debian/main'), alice);

    const added = await addDependencies(q.id, [s.id]);
    expect(added).toMatchObject({ __typename: 'WorkRequest', status: 'BLOCKED' });
    expect([...added.dependsOn].sort()).toEqual([p.id, s.id].sort());

    for (const [label, target, dependsOn] of [
      ['through another request', q.id, [r.id]],
      ['on itself', q.id, [q.id]],
      ['through a chain', r.id, [r.id, s.id]],
    ] as const) {
      const before = await snapshot(t, ['work_request', 'work_request_dependency']);
      const refused = await addDependencies(target, [...dependsOn]);
      expect(refused, label).toMatchObject({ __typename: 'InputError', code: 'DEPENDENCY_CYCLE', path: 'dependsOn' });
      expect(await snapshot(t, ['work_request', 'work_request_dependency'])).toEqual(before);
    }
  });

  it.each([
    ['an unknown dependency', 'blocked', ['999999'], { code: 'UNKNOWN_DEPENDENCY' }],
    ['a request that is not BLOCKED', 'pending', [], { code: 'INVALID_STATE' }],
    ['an unknown request', 'unknown', [], { __typename: 'NotFoundError', code: 'NOT_FOUND' }],
    ['an id that is not one', 'garbage', [], { code: 'INVALID_INPUT' }],
  ])('addWorkRequestDependencies refuses %s', async (_label, which, extra, expected) => {
    const p = await submitOk(t, sbuild('debian/main'), alice);
    const blocked = await submitOk(t, sbuild('debian/main', 'hello', { dependsOn: [p.id] }), alice);
    const id = { blocked: blocked.id, pending: p.id, unknown: '999999', garbage: 'abc' }[which]!;
    const before = await snapshot(t, ['work_request', 'work_request_dependency']);
    expect(await addDependencies(id, [p.id, ...extra])).toMatchObject(expected);
    expect(await snapshot(t, ['work_request', 'work_request_dependency'])).toEqual(before);
  });
});

describe('workRequests and workRequest queries', () => {
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    await createWorkspace(t, 'list/a');
    await createWorkspace(t, 'list/b');
    ids.aHello = (await submitOk(t, sbuild('list/a', 'hello'))).id;
    ids.aLinux = (await submitOk(t, sbuild('list/a', 'linux', { requiredTags: ['site:fast-disk'] }))).id;
    ids.bLintian = (
      await submitOk(t, {
        workspace: 'list/b',
        taskType: 'worker',
        taskName: 'lintian',
        taskData: { source_package: 'hello' },
      })
    ).id;
    ids.bBlocked = (await submitOk(t, sbuild('list/b', 'dpkg', { dependsOn: [ids.bLintian] }))).id;
    // Connected (so that it shows BUSY), but able to run none of these requests: a scheduler pass cannot assign it more work.
    await connectedWorker(t, 'list-worker', {}, { architectures: ['s390x'] });
    ids.bAssigned = (await submitOk(t, sbuild('list/b', 'coreutils'))).id;
    await t.sql(
      `update work_request set status = 'ASSIGNED', assigned_at = now(), worker_id = (select id from worker where name = 'list-worker') where id = ?`,
      [Number(ids.bAssigned)],
    );
  });

  const list = async (filter: Record<string, unknown>, first = 100) => {
    const r = await ok(
      t,
      'query($f: WorkRequestFilter, $n: Int) { workRequests(filter: $f, first: $n) { edges { node { id } } } }',
      { f: filter, n: first },
    );
    return r.workRequests.edges.map((e: { node: { id: string } }) => e.node.id);
  };

  it.each([
    ['workspace', { workspace: 'list/a' }, ['aLinux', 'aHello']],
    ['workspace and taskName', { workspace: 'list/b', taskName: 'lintian' }, ['bLintian']],
    ['status BLOCKED', { workspace: 'list/b', status: ['BLOCKED'] }, ['bBlocked']],
    ['several statuses', { workspace: 'list/b', status: ['BLOCKED', 'ASSIGNED'] }, ['bAssigned', 'bBlocked']],
    ['requiresTag (user tag)', { requiresTag: 'site:fast-disk' }, ['aLinux']],
    ['requiresTag (system tag)', { workspace: 'list/b', requiresTag: 'worker:cap:sbuild' }, ['bAssigned']],
    ['providesTag', { workspace: 'list/a', providesTag: 'task:source-package:linux' }, ['aLinux']],
    ['providesTag and workspace', { workspace: 'list/b', providesTag: 'task:source-package:hello' }, ['bLintian']],
    ['worker', { worker: 'list-worker' }, ['bAssigned']],
    ['a tag prefix (no match: tags match exactly)', { providesTag: 'task:source-package:lin' }, []],
  ])('filters by %s, newest first', async (_label, filter, expected) => {
    expect(await list(filter)).toEqual(expected.map((k) => ids[k]));
  });

  it('pages by cursor, newest first, without gaps or repeats', async () => {
    const all = await list({});
    expect(all.map(Number)).toEqual([...all.map(Number)].sort((x, y) => y - x));
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const r = await ok(
        t,
        'query($a: String) { workRequests(first: 4, after: $a) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }',
        { a: after },
      );
      seen.push(...r.workRequests.edges.map((e: { node: { id: string } }) => e.node.id));
      if (!r.workRequests.pageInfo.hasNextPage) break;
      after = r.workRequests.pageInfo.endCursor;
    }
    expect(seen).toEqual(all);
    expect(all.length).toBeGreaterThan(8);
  });

  it.each([
    [
      'a workspace filter without a scope',
      '{ workRequests(filter: { workspace: "nope" }) { edges { node { id } } } }',
      /filter\.workspace: a workspace is written "scope\/name"/,
    ],
    [
      'a workspace filter with two slashes',
      '{ workRequests(filter: { workspace: "a/b/c" }) { edges { node { id } } } }',
      /scope\/name/,
    ],
    ['a cursor it did not make', '{ workRequests(after: "zzz") { edges { node { id } } } }', /invalid cursor/],
    [
      'a negative page size',
      '{ workRequests(first: -1) { edges { node { id } } } }',
      /first must be between 0 and 500/,
    ],
  ])('refuses %s with an INVALID_INPUT error that says what to fix', async (_label, query, message) => {
    const r = await t.gql(query);
    expect(r.errors).toHaveLength(1);
    expect(r.errors![0].message).toMatch(message);
    expect(r.errors![0].extensions?.code).toBe('INVALID_INPUT');
  });

  it('finds one by id, and answers null for an unknown or malformed id', async () => {
    const r = await ok(
      t,
      'query($id: ID!) { workRequest(id: $id) { id taskName status worker { name } assignedAt } }',
      { id: ids.bAssigned },
    );
    expect(r.workRequest).toMatchObject({
      id: ids.bAssigned,
      taskName: 'sbuild',
      status: 'ASSIGNED',
      worker: { name: 'list-worker' },
    });
    expect(r.workRequest.assignedAt).not.toBeNull();
    expect(await ok(t, '{ workRequest(id: "999999") { id } }')).toEqual({ workRequest: null });
    expect(await ok(t, '{ workRequest(id: "x") { id } }')).toEqual({ workRequest: null });
  });

  it('shows the worker its assigned work as BUSY', async () => {
    const r = await ok(t, '{ worker(name: "list-worker") { status activeWorkCount } }');
    expect(r.worker).toEqual({ status: 'BUSY', activeWorkCount: 1 });
  });
});
