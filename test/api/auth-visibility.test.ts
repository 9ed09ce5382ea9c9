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
  sbuild,
  snapshot,
  submit,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp();

/** Who asks: each test looks the token up by name; `anonymous` sends none. */
const tokens: Record<string, string | null> = { anonymous: null };
/** Work requests by label. */
const wr: Record<string, string> = {};

beforeAll(async () => {
  tokens.admin = t.adminToken;
  await createWorkspace(t, 'vis/public');
  await createWorkspace(t, 'vis/private', { isPublic: false });
  await createWorkspace(t, 'vis/secret', { isPublic: false });
  tokens.alice = await memberOf(t, 'vis/private', 'alice');
  await memberOf(t, 'vis/public', 'alice-public-owner', 'OWNER').then((tk) => (tokens.publicOwner = tk));
  tokens.carol = await createUser(t, 'carol');
  tokens.viewer = await memberOf(t, 'vis/private', 'victor', 'VIEWER');
  tokens.w1 = await registerWorker(t, 'vis-w1');
  tokens.w2 = await registerWorker(t, 'vis-w2');
  await createPool(t, { name: 'vis-pool' });
  const activation = await ok(
    t,
    'mutation { createActivationToken(input: { pool: "vis-pool" }) { ... on ActivationTokenPayload { token } } }',
  );
  tokens.activation = activation.createActivationToken.token;

  wr.public = (await submitOk(t, sbuild('vis/public', 'pub-pkg'))).id;
  wr.private = (await submitOk(t, sbuild('vis/private', 'priv-pkg'), tokens.alice)).id;
  wr.secret = (await submitOk(t, sbuild('vis/secret', 'secret-pkg'))).id;
  wr.secretAssigned = (await submitOk(t, sbuild('vis/secret', 'secret-assigned'))).id;
  await t.sql(
    `update work_request set status = 'ASSIGNED', assigned_at = now(), worker_id = (select id from worker where name = 'vis-w1') where id = ?`,
    [Number(wr.secretAssigned)],
  );
});

const listIds = async (token: string | null, filter: Record<string, unknown> = {}) => {
  const r = await ok(
    t,
    'query($f: WorkRequestFilter) { workRequests(filter: $f, first: 500) { edges { node { id } } } }',
    { f: filter },
    token,
  );
  return (r.workRequests.edges as { node: { id: string } }[]).map((e) => e.node.id).sort();
};
const labels = (names: string[]) => names.map((n) => wr[n]).sort();

describe('work request visibility (docs/design.md: interfaces)', () => {
  it.each([
    ['admin', 'admin', ['public', 'private', 'secret', 'secretAssigned']],
    ['a member of the private workspace', 'alice', ['public', 'private']],
    ['a viewer of the private workspace', 'viewer', ['public', 'private']],
    ['a user who is a member of nothing', 'carol', ['public']],
    ['an anonymous caller', 'anonymous', ['public']],
    ['a worker with one (secret) assignment', 'w1', ['secretAssigned']],
    ['a worker with no assignment', 'w2', []],
    ['an activation token', 'activation', []],
  ])('%s sees exactly its work in workRequests and workRequest', async (who, key, visible) => {
    const token = tokens[key];
    expect(await listIds(token)).toEqual(labels(visible));
    for (const [label, id] of Object.entries(wr)) {
      const r = await ok(t, 'query($id: ID!) { workRequest(id: $id) { id } }', { id }, token);
      expect(r.workRequest, `${who} → ${label}`).toEqual(visible.includes(label) ? { id } : null);
    }
  });

  it('a filter cannot widen what a viewer sees', async () => {
    expect(await listIds(tokens.carol, { workspace: 'vis/secret' })).toEqual([]);
    expect(await listIds(tokens.anonymous, { workspace: 'vis/private' })).toEqual([]);
    expect(await listIds(tokens.w2, { worker: 'vis-w1' })).toEqual([]);
    expect(await listIds(tokens.w1, { workspace: 'vis/public' })).toEqual([]);
    expect(await listIds(tokens.alice, { status: ['ASSIGNED'] })).toEqual([]);
  });

  it('a request one cannot see cannot be depended on either: it is as unknown as a missing one', async () => {
    const before = await snapshot(t, ['work_request', 'work_request_dependency']);
    const hidden = await submit(t, sbuild('vis/private', 'hello', { dependsOn: [wr.secret] }), tokens.alice);
    const missing = await submit(t, sbuild('vis/private', 'hello', { dependsOn: ['999999'] }), tokens.alice);
    expect(hidden).toMatchObject({ code: 'UNKNOWN_DEPENDENCY', path: 'input.dependsOn' });
    expect(hidden.message.replace(wr.secret, 'N')).toBe(missing.message.replace('999999', 'N'));
    expect(await snapshot(t, ['work_request', 'work_request_dependency'])).toEqual(before);

    const blocked = await submitOk(t, sbuild('vis/private', 'hello', { dependsOn: [wr.private] }), tokens.alice);
    const added = await ok(
      t,
      `mutation($id: ID!, $d: [ID!]!) { addWorkRequestDependencies(input: { id: $id, dependsOn: $d }) { __typename ${ERROR_FIELDS} } }`,
      { id: blocked.id, d: [wr.secret] },
      tokens.alice,
    );
    expect(added.addWorkRequestDependencies.code).toBe('UNKNOWN_DEPENDENCY');
    await ok(
      t,
      'mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename } }',
      { id: blocked.id },
      tokens.alice,
    );
  });

  it('making a workspace public shows its work to everybody, and private again hides it', async () => {
    await expectResult(
      t,
      'Workspace',
      'mutation { updateWorkspace(input: { name: "vis/secret", isPublic: true }) { __typename ... on Workspace { isPublic } } }',
    );
    expect(await listIds(tokens.carol)).toEqual(labels(['public', 'secret', 'secretAssigned']));
    await expectResult(
      t,
      'Workspace',
      'mutation { updateWorkspace(input: { name: "vis/secret", isPublic: false }) { __typename } }',
    );
    expect(await listIds(tokens.carol)).toEqual(labels(['public']));
  });
});

describe('workspace visibility', () => {
  const workspaces = async (token: string | null) =>
    (await ok(t, '{ workspaces { name scope isPublic viewerRole members { user { username } role } } }', {}, token))
      .workspaces as {
      name: string;
      viewerRole: string | null;
      members: { user: { username: string }; role: string }[];
    }[];

  it.each([
    ['admin', ['vis/private', 'vis/public', 'vis/secret']],
    ['alice', ['vis/private', 'vis/public']],
    ['carol', ['vis/public']],
    ['anonymous', ['vis/public']],
    ['w1', ['vis/public']],
  ])('%s lists the workspaces it may see', async (who, expected) => {
    expect((await workspaces(tokens[who])).map((w) => w.name)).toEqual(expected);
  });

  it('shows members to admins and members only, and the viewer its own role', async () => {
    const byAlice = await workspaces(tokens.alice);
    const priv = byAlice.find((w) => w.name === 'vis/private')!;
    expect(priv.viewerRole).toBe('CONTRIBUTOR');
    expect(priv.members).toEqual([
      { user: { username: 'alice' }, role: 'CONTRIBUTOR' },
      { user: { username: 'victor' }, role: 'VIEWER' },
    ]);
    const pubByCarol = (await workspaces(tokens.carol)).find((w) => w.name === 'vis/public')!;
    expect(pubByCarol).toMatchObject({ viewerRole: null, members: [] });
    const pubByAdmin = (await workspaces(tokens.admin)).find((w) => w.name === 'vis/public')!;
    expect(pubByAdmin.members).toEqual([{ user: { username: 'alice-public-owner' }, role: 'OWNER' }]);
  });

  it('an owner may change its workspace and its members; a contributor may not', async () => {
    const granted = await expectResult(
      t,
      'Workspace',
      'mutation { updateWorkspace(input: { name: "vis/public", providableTagPrefixes: ["site:"] }) { __typename ... on Workspace { providableTagPrefixes } } }',
      {},
      tokens.publicOwner,
    );
    expect(granted.providableTagPrefixes).toEqual(['site:']);
    await expectResult(
      t,
      'Workspace',
      'mutation { setWorkspaceMember(input: { workspace: "vis/public", username: "carol", role: VIEWER }) { __typename } }',
      {},
      tokens.publicOwner,
    );
    expect((await workspaces(tokens.carol)).find((w) => w.name === 'vis/public')!.viewerRole).toBe('VIEWER');

    const refused = await ok(
      t,
      `mutation { updateWorkspace(input: { name: "vis/private", isPublic: true }) { __typename ${ERROR_FIELDS} } }`,
      {},
      tokens.alice,
    );
    expect(refused.updateWorkspace.code).toBe('FORBIDDEN');
    const member = await ok(
      t,
      `mutation { setWorkspaceMember(input: { workspace: "vis/private", username: "carol" }) { __typename ${ERROR_FIELDS} } }`,
      {},
      tokens.alice,
    );
    expect(member.setWorkspaceMember.code).toBe('FORBIDDEN');
    // A private workspace looks missing to those outside it, even to change it.
    const hidden = await ok(
      t,
      `mutation { updateWorkspace(input: { name: "vis/secret", isPublic: true }) { __typename ${ERROR_FIELDS} } }`,
      {},
      tokens.alice,
    );
    expect(hidden.updateWorkspace).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    expect(
      (await t.sql<{ is_public: boolean }>(`select is_public from workspace where name in ('private', 'secret')`)).map(
        (r) => r.is_public,
      ),
    ).toEqual([false, false]);
  });
});

describe('me', () => {
  it.each([
    ['admin', { username: 'admin', isAdmin: true }],
    ['alice', { username: 'alice', isAdmin: false }],
    ['anonymous', null],
    ['w1', null],
    ['activation', null],
  ])('for %s', async (who, expected) => {
    expect((await ok(t, '{ me { username isAdmin } }', {}, tokens[who])).me).toEqual(expected);
  });
});

describe('who may abort', () => {
  it('a viewer who cannot see a request gets NOT_FOUND, one who can but is not allowed gets FORBIDDEN', async () => {
    const hidden = await ok(
      t,
      `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ${ERROR_FIELDS} } }`,
      { id: wr.secret },
      tokens.alice,
    );
    expect(hidden.abortWorkRequest).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    const notMine = await ok(
      t,
      `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ${ERROR_FIELDS} } }`,
      { id: wr.public },
      tokens.carol,
    );
    expect(notMine.abortWorkRequest.code).toBe('FORBIDDEN');
    const byWorker = await ok(
      t,
      `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ${ERROR_FIELDS} } }`,
      { id: wr.secretAssigned },
      tokens.w1,
    );
    expect(byWorker.abortWorkRequest.code).toBe('FORBIDDEN');
    const statuses = await t.sql<{ status: string }>(
      'select status from work_request where id = any(?::int[]) order by id',
      [`{${wr.secret},${wr.public},${wr.secretAssigned}}`],
    );
    expect(statuses.map((s) => s.status)).toEqual(['PENDING', 'PENDING', 'ASSIGNED']);
  });

  it('the owner of the workspace may abort work someone else created', async () => {
    const r = await ok(
      t,
      `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { status statusReason } } }`,
      { id: wr.public },
      tokens.publicOwner,
    );
    expect(r.abortWorkRequest).toEqual({
      __typename: 'WorkRequest',
      status: 'ABORTED',
      statusReason: 'aborted by alice-public-owner',
    });
  });
});
