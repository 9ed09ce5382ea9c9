/**
 * Concurrent calls that used to race into 500s or into lies (issue 8, point 5): each caller gets a
 * truthful answer, and the rows are what one serial caller would have left.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS, createUser, createWorkspace } from '../helpers/fixtures.js';

const t = useTestApp();

type Json = Record<string, any>;

beforeAll(async () => {
  await createWorkspace(t, 'race/main');
  await createUser(t, 'pat');
});

/** The result union member of each of `n` concurrent runs of one mutation. */
async function concurrently(
  n: number,
  query: (i: number) => string,
  token: string | null = t.adminToken,
): Promise<Json[]> {
  const responses = await Promise.all(Array.from({ length: n }, (_, i) => t.gql(query(i), {}, token)));
  for (const r of responses) {
    expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
    expect(r.status).toBe(200);
  }
  return responses.map((r) => Object.values(r.data!)[0] as Json);
}

describe('setWorkspaceMember for one pair, 20 at once', () => {
  it('every call succeeds and one membership row remains, with one of the roles asked for', async () => {
    const roles = ['VIEWER', 'CONTRIBUTOR', 'OWNER'];
    const results = await concurrently(
      20,
      (i) =>
        `mutation { setWorkspaceMember(input: { workspace: "race/main", username: "pat", role: ${roles[i % 3]} }) { __typename ${ERROR_FIELDS} } }`,
    );
    expect(results.map((r) => r.__typename)).toEqual(Array(20).fill('Workspace'));
    const rows = await t.sql<{ role: string }>(
      `select m.role from workspace_member m join app_user u on u.id = m.user_id join workspace w on w.id = m.workspace_id where u.username = 'pat' and w.name = 'main'`,
    );
    expect(rows).toHaveLength(1);
    expect(roles.map((r) => r.toLowerCase())).toContain(rows[0].role);
  });
});

describe('createWorkspace in a scope that does not exist yet', () => {
  it('8 different workspaces at once: all are created, in one scope', async () => {
    const results = await concurrently(
      8,
      (i) =>
        `mutation { createWorkspace(input: { name: "fresh/ws-${i}" }) { __typename ... on Workspace { name } ${ERROR_FIELDS} } }`,
    );
    expect(
      results.map((r) => r.__typename),
      JSON.stringify(results),
    ).toEqual(Array(8).fill('Workspace'));
    const rows = await t.sql<{ scope: string; n: number }>(
      `select s.name as scope, count(w.id)::int as n from scope s join workspace w on w.scope_id = s.id where s.name = 'fresh' group by s.name`,
    );
    expect(rows).toEqual([{ scope: 'fresh', n: 8 }]);
  });

  it('8 times the same new workspace at once: one is created, the 7 others are told truthfully that it exists', async () => {
    const results = await concurrently(
      8,
      () => `mutation { createWorkspace(input: { name: "newer/same" }) { __typename ${ERROR_FIELDS} } }`,
    );
    const kinds = results.map((r) => r.__typename).sort();
    expect(kinds).toEqual([...Array(7).fill('AlreadyExistsError'), 'Workspace']);
    for (const r of results.filter((x) => x.__typename !== 'Workspace')) expect(r.message).toMatch(/newer\/same/);
    expect(
      await t.sql(
        `select 1 from workspace w join scope s on s.id = w.scope_id where s.name = 'newer' and w.name = 'same'`,
      ),
    ).toHaveLength(1);
  });

  it('groups created at once in a new scope: all created', async () => {
    const results = await concurrently(
      6,
      (i) => `mutation { createGroup(input: { scope: "gscope", name: "g${i}" }) { __typename ${ERROR_FIELDS} } }`,
    );
    expect(
      results.map((r) => r.__typename),
      JSON.stringify(results),
    ).toEqual(Array(6).fill('Group'));
    expect(await t.sql(`select 1 from scope where name = 'gscope'`)).toHaveLength(1);
  });

  it('the same user created 6 times at once: one is created, the others ALREADY_EXISTS', async () => {
    const results = await concurrently(
      6,
      () => `mutation { createUser(input: { username: "twin" }) { __typename ${ERROR_FIELDS} } }`,
    );
    expect(results.filter((r) => r.__typename === 'UserTokenPayload')).toHaveLength(1);
    expect(results.filter((r) => r.__typename === 'AlreadyExistsError')).toHaveLength(5);
    expect(await t.sql(`select 1 from app_user where username = 'twin'`)).toHaveLength(1);
  });
});
