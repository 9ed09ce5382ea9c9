import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

// The maxima the cost model counts on (src/services/input/list-maxima.ts, docs/reference/limits.md
// "Lists") are enforced where the lists are written, under concurrency too, with an InputError.
const t = useTestApp();
let owner: string;

async function createUser(username: string): Promise<string> {
  const res = await t.gql(
    `mutation($u: String!) { createUser(input: { username: $u }) { ... on UserTokenPayload { token } } }`,
    { u: username },
  );
  return res.data!.createUser.token as string;
}

beforeAll(async () => {
  owner = await createUser('ws-owner');
  await t.gql(`mutation { createWorkspace(input: { name: "max/one", isPublic: false }) { __typename } }`);
  const set = await t.gql(
    `mutation { setWorkspaceMember(input: { workspace: "max/one", username: "ws-owner", role: OWNER }) { __typename } }`,
  );
  expect(set.data!.setWorkspaceMember.__typename).toBe('Workspace');
  for (let i = 0; i < 100; i++) await createUser(`m${i}`);
});

const addRule = (workspace: string | null, name: string, token?: string) =>
  t.gql(
    `mutation($w: String, $n: String!) { createTaskRule(input: { workspace: $w, name: $n, providedTags: ["task:team:x"] }) { __typename ... on Error { code message } } }`,
    { w: workspace, n: name },
    token,
  );

describe('list maxima are enforced when written', () => {
  it('60 rules added at once by a workspace owner: exactly 50 are taken, the others refused with INVALID_RULE', async () => {
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => addRule('max/one', `r${i}`, owner)));
    const kinds = answers.map((a) => a.data?.createTaskRule?.__typename ?? a.errors?.[0]?.message);
    expect(kinds.filter((k) => k === 'TaskRule')).toHaveLength(50);
    const refused = answers.map((a) => a.data?.createTaskRule).filter((r) => r?.__typename === 'InputError');
    expect(refused).toHaveLength(10);
    for (const r of refused)
      expect(r).toMatchObject({ code: 'INVALID_RULE', message: 'input: a workspace holds at most 50 rules' });
    const rules = await t.gql(`{ workspace(name: "max/one") { rules { name } } }`, {}, owner);
    expect(rules.data!.workspace.rules).toHaveLength(50);
  });

  it('site rules: at most 50', async () => {
    for (let i = 0; i < 50; i++)
      expect((await addRule(null, `s${i}`)).data!.createTaskRule.__typename).toBe('TaskRule');
    expect((await addRule(null, 's50')).data!.createTaskRule).toMatchObject({
      __typename: 'InputError',
      message: 'input: the site holds at most 50 rules',
    });
    expect((await t.gql(`{ siteRules { name } }`)).data!.siteRules).toHaveLength(50);
  });

  it('a workspace holds at most 100 members; a member already there may still change role', async () => {
    const set = (username: string, role = 'CONTRIBUTOR') =>
      t.gql(
        `mutation($u: String!, $r: WorkspaceRole) { setWorkspaceMember(input: { workspace: "max/one", username: $u, role: $r }) { __typename ... on Error { code message path } } }`,
        { u: username, r: role },
        owner,
      );
    // The owner is one member; 99 more fill it.
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => set(`m${i}`)));
    const taken = answers.filter((a) => a.data!.setWorkspaceMember.__typename === 'Workspace');
    expect(taken).toHaveLength(99);
    const refused = answers.map((a) => a.data!.setWorkspaceMember).filter((r) => r.__typename === 'InputError');
    expect(refused).toEqual([
      {
        __typename: 'InputError',
        code: 'INVALID_INPUT',
        message: 'input.username: a workspace holds at most 100 members (groups hold more people)',
        path: 'input.username',
      },
    ]);
    const members = await t.gql(`{ workspace(name: "max/one") { members { user { username } } } }`, {}, owner);
    expect(members.data!.workspace.members).toHaveLength(100);
    const firstMember = members.data!.workspace.members.find(
      (m: { user: { username: string } }) => m.user.username !== 'ws-owner',
    ).user.username as string;
    expect((await set(firstMember, 'VIEWER')).data!.setWorkspaceMember.__typename).toBe('Workspace');
  });

  it('a group holds at most 100 members', async () => {
    const group = await t.gql(
      `mutation { createGroup(input: { scope: "max", name: "team" }) { ... on Group { id } } }`,
    );
    const id = group.data!.createGroup.id as string;
    const add = (usernames: string[]) =>
      t.gql(
        `mutation($g: ID!, $u: [String!]!) { addGroupMembers(input: { group: $g, usernames: $u }) { __typename ... on Error { code message } ... on Group { members { username } } } }`,
        {
          g: id,
          u: usernames,
        },
      );
    const names = Array.from({ length: 100 }, (_, i) => `m${i}`);
    expect((await add(names.slice(0, 60))).data!.addGroupMembers.members).toHaveLength(60);
    expect((await add([...names.slice(60), 'ws-owner'])).data!.addGroupMembers).toEqual({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      message: 'input.usernames: a group holds at most 100 members',
    });
    expect((await add(names.slice(60))).data!.addGroupMembers.members).toHaveLength(100);
  });

  it('a first past its maximum is refused; a smaller one cuts the list', async () => {
    const past = await t.gql(`{ workspaces(first: 501) { name } }`);
    expect(past.errors?.[0]?.message).toBe('first must be between 0 and 500');
    expect(past.errors?.[0]?.extensions?.code).toBe('INVALID_INPUT');
    await t.gql(`mutation { createWorkspace(input: { name: "max/two" }) { __typename } }`);
    expect((await t.gql(`{ workspaces(first: 1) { name } }`)).data!.workspaces).toEqual([{ name: 'max/one' }]);
    expect((await t.gql(`{ workspaces { name } }`)).data!.workspaces).toEqual([
      { name: 'max/one' },
      { name: 'max/two' },
    ]);
  });
});
