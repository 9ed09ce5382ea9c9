import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  ERROR_FIELDS,
  createPool,
  createUser,
  createWorkspace,
  expectResult,
  memberOf,
  ok,
  registerWorker,
  reportMetadata,
  sbuild,
  snapshot,
  submit,
  submitOk,
  tagsOf,
} from '../helpers/fixtures.js';

/** Small limits, so that the limits are easy to cross. */
const MAX_TASK_DATA_BYTES = 1000;
const MAX_TAGS = 5;
const t = useTestApp({ input: { maxTaskDataBytes: MAX_TASK_DATA_BYTES, maxTagsPerSet: MAX_TAGS } });

type Json = Record<string, any>;

let alice: string; // contributor of bad/main
let carol: string; // member of nothing
let viewer: string; // viewer of bad/main
let workerToken: string;

beforeAll(async () => {
  await createWorkspace(t, 'bad/main');
  await createWorkspace(t, 'bad/hidden', { isPublic: false });
  await createWorkspace(t, 'bad/other');
  alice = await memberOf(t, 'bad/main', 'alice');
  carol = await createUser(t, 'carol');
  viewer = await memberOf(t, 'bad/main', 'vera', 'VIEWER');
  await createPool(t, { name: 'bad-pool' });
  workerToken = await registerWorker(t, 'bad-worker', { pool: 'bad-pool' });
});

/** Submits as alice (unless told otherwise) and checks that the refusal matches and wrote nothing. */
async function expectRefused(input: Json, expected: Json, token: string | null = alice): Promise<Json> {
  const before = await snapshot(t);
  const r = await submit(t, input, token);
  expect(r).toMatchObject(expected);
  expect(typeof r.message).toBe('string');
  expect(r.message.length).toBeGreaterThan(10);
  expect(await snapshot(t)).toEqual(before);
  return r;
}

describe('createWorkRequest refuses bad input with a typed error and writes nothing', () => {
  it.each([
    [
      'a required tag with a space',
      { requiredTags: ['site:ok', 'bad tag'] },
      { __typename: 'InputError', code: 'INVALID_TAG', path: 'input.requiredTags[1]', tag: 'bad tag' },
    ],
    [
      'a required tag with a value',
      { requiredTags: ['worker:cpu-count=4'] },
      { code: 'INVALID_TAG', path: 'input.requiredTags[0]', tag: 'worker:cpu-count=4' },
    ],
    ['an empty provided tag', { providedTags: [''] }, { code: 'INVALID_TAG', path: 'input.providedTags[0]', tag: '' }],
    [
      'a provided tag with a minimum',
      { providedTags: ['worker:cpu-count>=4'] },
      { code: 'INVALID_TAG', path: 'input.providedTags[0]' },
    ],
    [
      'a tag of 256 characters',
      { requiredTags: ['x'.repeat(256)] },
      { code: 'INVALID_TAG', path: 'input.requiredTags[0]' },
    ],
    [
      'a provided task:workspace tag',
      { providedTags: ['task:workspace:debian:security'] },
      { code: 'TAG_NOT_ALLOWED', path: 'input.providedTags[0]', tag: 'task:workspace:debian:security' },
    ],
    [
      'a provided task:scope tag',
      { providedTags: ['task:scope:debian'] },
      { code: 'TAG_NOT_ALLOWED', tag: 'task:scope:debian' },
    ],
    [
      'a provided custom tag the workspace does not grant',
      { providedTags: ['site:gpu'] },
      { code: 'TAG_NOT_ALLOWED', path: 'input.providedTags[0]', tag: 'site:gpu' },
    ],
    ['an unknown task name', { taskName: 'sbuild2' }, { code: 'UNKNOWN_TASK', path: 'input.taskName' }],
    ['an unknown task type', { taskType: 'gpu' }, { code: 'UNKNOWN_TASK', path: 'input.taskType' }],
    [
      'taskData missing a field',
      { taskData: { host_architecture: 'amd64' } },
      { code: 'INVALID_TASK_DATA', path: 'input.taskData.source_package' },
    ],
    [
      'taskData with an unknown key',
      { taskData: { source_package: 'hello', host_architecture: 'amd64', colour: 'red' } },
      { code: 'INVALID_TASK_DATA', path: 'input.taskData.colour' },
    ],
    [
      'taskData with a bad architecture',
      { taskData: { source_package: 'hello', host_architecture: 'AMD 64' } },
      { code: 'INVALID_TASK_DATA', path: 'input.taskData.host_architecture' },
    ],
    ['taskData that is not an object', { taskData: 'hello' }, { code: 'INVALID_TASK_DATA' }],
    [
      'an unknown environment',
      { taskData: { source_package: 'hello', host_architecture: 'amd64', environment_id: 4242 } },
      { code: 'UNKNOWN_ENVIRONMENT', path: 'input.taskData.environment_id' },
    ],
    ['an unknown dependency', { dependsOn: ['987654'] }, { code: 'UNKNOWN_DEPENDENCY', path: 'input.dependsOn' }],
    [
      'a dependency id that is not a number',
      { dependsOn: ['abc'] },
      { code: 'INVALID_INPUT', path: 'input.dependsOn[0]' },
    ],
    [
      'a workspace that does not exist',
      { workspace: 'bad/nope' },
      { __typename: 'NotFoundError', code: 'NOT_FOUND', path: 'input.workspace' },
    ],
    ['a workspace name without a scope', { workspace: 'main' }, { code: 'INVALID_INPUT', path: 'input.workspace' }],
    [
      'a public workspace the user is not a member of',
      { workspace: 'bad/other' },
      { __typename: 'ForbiddenError', code: 'FORBIDDEN' },
    ],
    [
      'a private workspace the user is not a member of',
      { workspace: 'bad/hidden' },
      { __typename: 'NotFoundError', code: 'NOT_FOUND', path: 'input.workspace' },
    ],
    ['a positive priorityAdjustment', { priorityAdjustment: 1 }, { __typename: 'ForbiddenError', code: 'FORBIDDEN' }],
    ['a priority out of range', { priorityBase: 2_000_000 }, { code: 'INVALID_INPUT', path: 'input.priorityBase' }],
    [
      `more than ${MAX_TAGS} required tags`,
      { requiredTags: ['a:1', 'a:2', 'a:3', 'a:4', 'a:5', 'a:6'] },
      { code: 'TOO_MANY_TAGS', path: 'input.requiredTags' },
    ],
    [
      `more than ${MAX_TAGS} provided tags`,
      { providedTags: ['a:1', 'a:2', 'a:3', 'a:4', 'a:5', 'a:6'] },
      { code: 'TOO_MANY_TAGS', path: 'input.providedTags' },
    ],
    [
      `taskData over ${MAX_TASK_DATA_BYTES} bytes`,
      { taskName: 'noop', taskData: { result: true, padding: 'x'.repeat(MAX_TASK_DATA_BYTES) } },
      { code: 'TASK_DATA_TOO_LARGE', path: 'input.taskData' },
    ],
  ])('%s', async (_label, change, expected) => {
    await expectRefused({ ...sbuild('bad/main'), ...change }, expected);
  });

  it('counts taskData in UTF-8 bytes, not characters', async () => {
    // 400 three-byte characters: 400 characters but 1200 bytes.
    await expectRefused(
      { ...sbuild('bad/main'), taskName: 'noop', taskData: { pad: '€'.repeat(400) } },
      { code: 'TASK_DATA_TOO_LARGE' },
    );
  });

  it('a private workspace outside the user looks exactly like a missing one', async () => {
    const hidden = await submit(t, sbuild('bad/hidden'), carol);
    const missing = await submit(t, sbuild('bad/nohere'), carol);
    expect(hidden.__typename).toBe(missing.__typename);
    expect(hidden.message.replace('bad/hidden', 'X')).toBe(missing.message.replace('bad/nohere', 'X'));
  });

  it('a workspace viewer may not submit', async () => {
    await expectRefused(sbuild('bad/main'), { code: 'FORBIDDEN' }, viewer);
  });

  it('a tag at the limits is accepted', async () => {
    const wr = await submitOk(
      t,
      { ...sbuild('bad/main'), requiredTags: ['a:1', 'a:2', 'a:3', 'a:4', 'x'.repeat(255)] },
      alice,
    );
    expect(tagsOf(wr.requiredTags)).toContain('x'.repeat(255));
  });
});

describe('a provided tag under a prefix the workspace does not grant', () => {
  it('is refused, then accepted once updateWorkspace grants the prefix, with user provenance', async () => {
    await createWorkspace(t, 'bad/grants');
    const member = await memberOf(t, 'bad/grants', 'granted-user');
    const input = { ...sbuild('bad/grants'), providedTags: ['site:gpu-ok'] };
    const refused = await expectRefused(
      input,
      { code: 'TAG_NOT_ALLOWED', tag: 'site:gpu-ok', path: 'input.providedTags[0]' },
      member,
    );
    expect(refused.message).toContain('site:gpu-ok');

    await expectResult(
      t,
      'Workspace',
      'mutation { updateWorkspace(input: { name: "bad/grants", providableTagPrefixes: ["site:gpu"] }) { __typename } }',
    );
    const wr = await submitOk(t, input, member);
    expect(wr.providedTags).toContainEqual({ tag: 'site:gpu-ok', provenance: 'USER', source: 'user-input' });

    // A granted prefix does not lift an ontology's own restriction.
    await expectResult(
      t,
      'Workspace',
      'mutation { updateWorkspace(input: { name: "bad/grants", providableTagPrefixes: ["site:gpu", "task:"] }) { __typename } }',
    );
    await expectRefused(
      { ...input, providedTags: ['task:source-package:linux'] },
      { code: 'TAG_NOT_ALLOWED', tag: 'task:source-package:linux' },
      member,
    );
    // Nor does it reach beyond the prefix.
    await expectRefused({ ...input, providedTags: ['site:cpu'] }, { code: 'TAG_NOT_ALLOWED', tag: 'site:cpu' }, member);
  });
});

describe('a worker claiming tags it may not provide', () => {
  it.each([
    'worker:class:trusted',
    'worker:class:large',
    'worker:type:signing',
    'worker:type:server',
    'site:custom',
    'worker:executor:auto',
  ])('is not an error: %s is dropped and recorded in rejectedTags', async (tag) => {
    const w = await reportMetadata(t, workerToken, { architectures: ['amd64'], providedTags: [tag, 'worker:cap:kvm'] });
    expect(tagsOf(w.providedTags)).not.toContain(tag);
    expect(tagsOf(w.providedTags)).toContain('worker:cap:kvm');
    expect(w.rejectedTags).toEqual([
      expect.objectContaining({ tag, provenance: 'WORKER', code: 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY' }),
    ]);
    const [row] = await t.sql<{ provided_tags: string[]; rejected_tags: { tag: string }[] }>(
      `select provided_tags, rejected_tags from worker where name = 'bad-worker'`,
    );
    expect(row.provided_tags).not.toContain(tag);
    expect(row.rejected_tags.map((r) => r.tag)).toEqual([tag]);
  });

  it('an invalid tag in a report is dropped too, not refused', async () => {
    const w = await reportMetadata(t, workerToken, { providedTags: ['not valid', 'worker:cap:kvm'] });
    expect(tagsOf(w.providedTags)).toContain('worker:cap:kvm');
    expect(w.rejectedTags).toEqual([expect.objectContaining({ tag: 'not valid', code: 'INVALID_SYNTAX' })]);
  });
});

describe('tokens', () => {
  const MUTATIONS_NEEDING_A_TOKEN: [string, string][] = [
    [
      'createWorkRequest',
      'createWorkRequest(input: { workspace: "bad/main", taskType: "worker", taskName: "noop", taskData: {} })',
    ],
    ['abortWorkRequest', 'abortWorkRequest(input: { id: "1" })'],
    ['addWorkRequestDependencies', 'addWorkRequestDependencies(input: { id: "1", dependsOn: ["2"] })'],
    ['registerWorker', 'registerWorker(input: { name: "anon-w" })'],
    ['reportWorkerMetadata', 'reportWorkerMetadata(input: { metadata: { cpuCount: 1 } })'],
    ['activateWorker', 'activateWorker(input: { name: "anon-a" })'],
    ['createWorkerPool', 'createWorkerPool(input: { name: "anon-pool", providerType: "local" })'],
    ['drainWorker', 'drainWorker(input: { name: "bad-worker" })'],
    ['createTaskRule', 'createTaskRule(input: { name: "anon-rule", requiredTags: ["a:b"] })'],
    ['createWorkspace', 'createWorkspace(input: { name: "anon/ws" })'],
  ];

  it.each(MUTATIONS_NEEDING_A_TOKEN)(
    '%s without a token is an UnauthenticatedError and writes nothing',
    async (field, call) => {
      const before = await snapshot(t);
      const r = await ok(t, `mutation { ${call} { __typename ${ERROR_FIELDS} } }`, {}, null);
      expect(r[field]).toMatchObject({ __typename: 'UnauthenticatedError', code: 'UNAUTHENTICATED' });
      expect(r[field].message).toMatch(/bearer token/i);
      expect(await snapshot(t)).toEqual(before);
    },
  );

  const expect401 = async (token: string, query: string) => {
    const before = await snapshot(t);
    const r = await t.gql(query, {}, token);
    expect(r.status).toBe(401);
    expect(r.data ?? null).toBeNull();
    expect(r.errors).toHaveLength(1);
    expect(r.errors![0].extensions?.code).toBe('UNAUTHENTICATED');
    expect(await snapshot(t)).toEqual(before);
    return r.errors![0].message;
  };
  const AS_QUERY = '{ me { username } }';
  const AS_MUTATION = 'mutation { createWorkspace(input: { name: "tok/ws" }) { __typename } }';

  it.each([
    ['a query', AS_QUERY],
    ['a mutation', AS_MUTATION],
  ])('a wrong token on %s is refused with HTTP 401 UNAUTHENTICATED', async (_label, query) => {
    expect(await expect401('tsk_admin_this-is-not-a-real-token', query)).toMatch(/not valid/);
  });

  it('a disabled token is refused with HTTP 401 UNAUTHENTICATED', async () => {
    const token = await createUser(t, 'soon-disabled', true);
    expect((await ok(t, AS_QUERY, {}, token)).me).toEqual({ username: 'soon-disabled' });
    await t.sql(
      `update token set enabled = false where user_id = (select id from app_user where username = 'soon-disabled')`,
    );
    expect(await expect401(token, AS_QUERY)).toMatch(/disabled/);
    await expect401(token, AS_MUTATION);
  });

  it('the token of a terminated worker is refused with HTTP 401', async () => {
    const token = await registerWorker(t, 'bad-terminated', { pool: 'bad-pool' });
    await t.sql(`update worker set terminated_at = now() where name = 'bad-terminated'`);
    await expect401(token, 'mutation { reportWorkerMetadata(input: { metadata: { cpuCount: 2 } }) { __typename } }');
  });
});

describe('only admins change workers, pools, environments and the directory', () => {
  const ADMIN_MUTATIONS: [string, string][] = [
    ['registerWorker', 'registerWorker(input: { name: "evil-w" })'],
    [
      'setWorkerStaticMetadata',
      'setWorkerStaticMetadata(input: { name: "bad-worker", metadata: { providedTags: ["worker:class:trusted"] } })',
    ],
    ['drainWorker', 'drainWorker(input: { name: "bad-worker" })'],
    ['undrainWorker', 'undrainWorker(input: { name: "bad-worker" })'],
    ['enableWorker', 'enableWorker(input: { name: "bad-worker" })'],
    ['disableWorker', 'disableWorker(input: { name: "bad-worker" })'],
    ['createWorkerPool', 'createWorkerPool(input: { name: "evil-pool", providerType: "local" })'],
    ['updateWorkerPool', 'updateWorkerPool(input: { name: "bad-pool", providedTags: ["worker:class:trusted"] })'],
    ['createActivationToken', 'createActivationToken(input: { pool: "bad-pool" })'],
    ['createEnvironment', 'createEnvironment(input: { codename: "sid", architecture: "amd64" })'],
    ['createWorkspace', 'createWorkspace(input: { name: "evil/ws" })'],
    ['createUser', 'createUser(input: { username: "evil", isAdmin: true })'],
    ['createGroup', 'createGroup(input: { scope: "bad", name: "Evil" })'],
    ['createTaskRule', 'createTaskRule(input: { name: "evil-site-rule", requiredTags: ["a:b"] })'],
  ];

  it.each(ADMIN_MUTATIONS)('%s by a user or a worker is FORBIDDEN and writes nothing', async (field, call) => {
    for (const token of [alice, workerToken]) {
      const before = await snapshot(t);
      const r = await ok(t, `mutation { ${call} { __typename ${ERROR_FIELDS} } }`, {}, token);
      expect(r[field]).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      expect(await snapshot(t)).toEqual(before);
    }
  });

  it('addGroupMembers by a user is FORBIDDEN', async () => {
    const g = await expectResult(
      t,
      'Group',
      'mutation { createGroup(input: { scope: "bad", name: "Real" }) { __typename ... on Group { id } } }',
    );
    const before = await snapshot(t);
    const r = await ok(
      t,
      `mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["alice"] }) { __typename ${ERROR_FIELDS} } }`,
      { g: g.id },
      alice,
    );
    expect(r.addGroupMembers.code).toBe('FORBIDDEN');
    expect(await snapshot(t)).toEqual(before);
  });

  it('reportWorkerMetadata needs a worker token', async () => {
    const before = await snapshot(t);
    const r = await ok(
      t,
      `mutation { reportWorkerMetadata(input: { metadata: { cpuCount: 1 } }) { __typename ${ERROR_FIELDS} } }`,
      {},
      alice,
    );
    expect(r.reportWorkerMetadata.code).toBe('FORBIDDEN');
    expect(await snapshot(t)).toEqual(before);
  });

  it('a worker token may not submit work', async () => {
    await expectRefused(sbuild('bad/main'), { code: 'FORBIDDEN' }, workerToken);
  });
});

describe('other limits', () => {
  it.each([
    [
      'pool tags',
      `createWorkerPool(input: { name: "many", providerType: "local", providedTags: ["a:1","a:2","a:3","a:4","a:5","a:6"] })`,
      'createWorkerPool',
      'input.providedTags',
    ],
    [
      'rule tags',
      `createTaskRule(input: { name: "many", requiredTags: ["a:1","a:2","a:3","a:4","a:5","a:6"] })`,
      'createTaskRule',
      'input.requiredTags',
    ],
  ])('too many %s is TOO_MANY_TAGS', async (_label, call, field, path) => {
    const before = await snapshot(t);
    const r = await ok(t, `mutation { ${call} { __typename ${ERROR_FIELDS} } }`);
    expect(r[field]).toMatchObject({ code: 'TOO_MANY_TAGS', path });
    expect(await snapshot(t)).toEqual(before);
  });
});

describe('every problem of an input at once', () => {
  const PROBLEMS = `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) {
    __typename ... on InputError { code path tag problems { code path tag message } } } }`;
  async function problemsOf(change: Json): Promise<Json> {
    const before = await snapshot(t);
    const data = await ok(t, PROBLEMS, { i: { ...sbuild('bad/main'), ...change } }, alice);
    expect(await snapshot(t)).toEqual(before);
    return data.createWorkRequest;
  }

  it('two malformed tags: both, in order, each with its path; the error itself is the first', async () => {
    const r = await problemsOf({ requiredTags: ['bad tag', 'site:ok', 'worker:cpu-count=4'] });
    expect(r).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_TAG',
      path: 'input.requiredTags[0]',
      tag: 'bad tag',
    });
    expect(r.problems.map((p: Json) => [p.code, p.path, p.tag])).toEqual([
      ['INVALID_TAG', 'input.requiredTags[0]', 'bad tag'],
      ['INVALID_TAG', 'input.requiredTags[2]', 'worker:cpu-count=4'],
    ]);
    for (const p of r.problems) expect(p.message.length).toBeGreaterThan(10);
  });

  it('malformed tags in both lists: all of them, provided first', async () => {
    const r = await problemsOf({ providedTags: ['', 'site:ok'], requiredTags: ['bad tag'] });
    expect(r.problems.map((p: Json) => [p.code, p.path])).toEqual([
      ['INVALID_TAG', 'input.providedTags[0]'],
      ['INVALID_TAG', 'input.requiredTags[0]'],
    ]);
  });

  it('two tags the user may not provide: both', async () => {
    const r = await problemsOf({ providedTags: ['site:gpu', 'task:scope:debian'] });
    expect(r.problems.map((p: Json) => [p.code, p.path, p.tag])).toEqual([
      ['TAG_NOT_ALLOWED', 'input.providedTags[0]', 'site:gpu'],
      ['TAG_NOT_ALLOWED', 'input.providedTags[1]', 'task:scope:debian'],
    ]);
  });

  it('one problem: the list holds the error itself', async () => {
    const r = await problemsOf({ taskName: 'sbuild2' });
    expect(r.problems).toEqual([{ code: 'UNKNOWN_TASK', path: r.path, tag: null, message: expect.any(String) }]);
    expect(r.path).toBe('input.taskName');
  });
});
