/**
 * `user list`, `workspace member remove` and `rule remove` end to end (runAdmin against the real
 * app over HTTP), with what they change read back through GraphQL, and the hostile cases: no token,
 * an outsider, unknown names, a NUL. The API underneath: users, removeWorkspaceMember, deleteTaskRule.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { EXIT } from '../../../src/cli/admin/exit-codes.js';
import { ADMIN_TOKEN, useTestApp } from '../../helpers/app.js';
import { ok } from '../../helpers/fixtures.js';
import { runCli, type RunOptions } from './harness.js';

const t = useTestApp();
vi.setConfig({ testTimeout: 120_000 });
let url: string;
const cli = (argv: string[], options: RunOptions = {}) => runCli(url, argv, { token: ADMIN_TOKEN, ...options });
let ownerToken: string;
let outsiderToken: string;

beforeAll(async () => {
  ({ url } = await t.app.start());
  ownerToken = (await cli(['user', 'create', 'olga'])).stdout.trim();
  outsiderToken = (await cli(['user', 'create', 'otto'])).stdout.trim();
  await cli(['user', 'create', 'carla']);
  await cli(['workspace', 'create', 'team/private', '--private']);
  await cli(['workspace', 'member', 'add', 'team/private', 'olga', '--role', 'owner']);
  await cli(['workspace', 'member', 'add', 'team/private', 'carla']);
});

const membersOf = async (workspace: string) =>
  (
    (await ok(t, '{ workspaces { name members { user { username } } } }')).workspaces as {
      name: string;
      members: { user: { username: string } }[];
    }[]
  )
    .find((w) => w.name === workspace)!
    .members.map((m) => m.user.username);

describe('user list', () => {
  it('lists every user by name for an admin, in pages, as a table and as --json', async () => {
    const table = await cli(['user', 'list']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^USER\s+ADMIN\n/);
    expect(table.stdout).toMatch(/^carla\s+no$/m);
    expect(table.stdout).toMatch(/^olga\s+no$/m);
    const all = JSON.parse((await cli(['user', 'list', '--json'])).stdout).users.edges.map(
      (e: { node: { username: string } }) => e.node.username,
    );
    expect(all).toEqual([...all].sort());
    expect(all).toEqual(expect.arrayContaining(['carla', 'olga', 'otto']));
    const one = await cli(['user', 'list', '--limit', '1']);
    expect(one.stdout.trim().split('\n')).toHaveLength(2);
    expect(one.stderr).toContain('more users');
    // The API pages by name: the second page starts after the first one's cursor.
    const first = await ok(t, '{ users(first: 2) { edges { node { username } } pageInfo { hasNextPage endCursor } } }');
    const next = await ok(t, 'query($a: String) { users(first: 2, after: $a) { edges { node { username } } } }', {
      a: first.users.pageInfo.endCursor,
    });
    expect(
      [...first.users.edges, ...next.users.edges].map((e: { node: { username: string } }) => e.node.username),
    ).toEqual(all.slice(0, 4));
  });

  it('is refused to non-admins (5) and without a token (2); the API answers FORBIDDEN and UNAUTHENTICATED', async () => {
    expect((await cli(['user', 'list'], { token: outsiderToken })).code).toBe(EXIT.forbidden);
    expect((await cli(['user', 'list'], { token: null })).code).toBe(EXIT.auth);
    const forbidden = await t.gql('{ users { edges { node { username } } } }', {}, outsiderToken);
    expect(forbidden.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const anonymous = await t.gql('{ users { edges { node { username } } } }', {}, null);
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const badCursor = await t.gql('{ users(after: "\\u0000") { edges { node { username } } } }');
    expect(badCursor.errors?.[0]?.extensions?.code).toBe('INVALID_INPUT');
  });
});

describe('workspace member remove', () => {
  it('an owner removes a member; a user who is not one is NOT_FOUND (3)', async () => {
    const removed = await cli(['workspace', 'member', 'remove', 'team/private', 'carla'], { token: ownerToken });
    expect(removed.stdout).toBe('carla is no longer a member of team/private.\n');
    expect(await membersOf('team/private')).toEqual(['olga']);
    const again = await cli(['workspace', 'member', 'remove', 'team/private', 'carla'], { token: ownerToken });
    expect(again.code).toBe(EXIT.notFound);
    expect((await cli(['workspace', 'member', 'remove', 'team/private', 'nobody'])).code).toBe(EXIT.notFound);
  });

  it('an outsider is told the private workspace does not exist, a member who is no owner is refused, no token is refused', async () => {
    await cli(['workspace', 'member', 'add', 'team/private', 'carla', '--role', 'viewer']);
    const carla = (await cli(['token', 'create', '--user', 'carla'])).stdout.trim();
    expect((await cli(['workspace', 'member', 'remove', 'team/private', 'olga'], { token: outsiderToken })).code).toBe(
      EXIT.notFound,
    );
    expect((await cli(['workspace', 'member', 'remove', 'team/private', 'olga'], { token: carla })).code).toBe(
      EXIT.forbidden,
    );
    expect((await cli(['workspace', 'member', 'remove', 'team/private', 'olga'], { token: null })).code).toBe(
      EXIT.auth,
    );
    expect(await membersOf('team/private')).toEqual(['carla', 'olga']);
    const nul = await ok(
      t,
      'mutation { removeWorkspaceMember(input: { workspace: "team/private", username: "ol\\u0000ga" }) { __typename ... on Error { code path } } }',
    );
    expect(nul.removeWorkspaceMember).toMatchObject({ __typename: 'InputError', code: 'INVALID_INPUT' });
  });
});

describe('rule remove', () => {
  it('removes a workspace rule (its owner) and a site rule (an admin); new work no longer gets its tags', async () => {
    await cli(['rule', 'add', 'big', '--workspace', 'team/private', '--require', 'worker:class:large'], {
      token: ownerToken,
    });
    await cli(['rule', 'add', 'site-wide', '--require', 'worker:executor:unshare']);
    const required = async () =>
      (
        await ok(
          t,
          'mutation { createWorkRequest(input: { workspace: "team/private", taskType: "worker", taskName: "noop", taskData: {} }) { __typename ... on WorkRequest { requiredTags { tag } } } }',
          {},
          ownerToken,
        )
      ).createWorkRequest.requiredTags.map((e: { tag: string }) => e.tag);
    expect(await required()).toContain('worker:class:large');
    const removed = await cli(['rule', 'remove', 'big', '--workspace', 'team/private'], { token: ownerToken });
    expect(removed.stdout).toBe(
      'Removed rule big of team/private; work requests created from now on no longer get its tags.\n',
    );
    const site = JSON.parse((await cli(['rule', 'remove', 'site-wide', '--json'])).stdout);
    expect(site.deleteTaskRule).toMatchObject({
      name: 'site-wide',
      workspace: null,
      requiredTags: ['worker:executor:unshare'],
    });
    expect((await ok(t, '{ siteRules { name } }')).siteRules).toEqual([]);
    const after = await required();
    expect(after).not.toContain('worker:class:large');
    expect(after).not.toContain('worker:executor:unshare');
    expect((await cli(['rule', 'remove', 'big', '--workspace', 'team/private'])).code).toBe(EXIT.notFound);
  });

  it('refuses a site rule to a non-admin (5), a private workspace rule to an outsider as unknown (3), no token (2), a NUL (4)', async () => {
    await cli(['rule', 'add', 'keep', '--require', 'worker:executor:unshare']);
    await cli(['rule', 'add', 'keep-ws', '--workspace', 'team/private', '--require', 'worker:class:large']);
    expect((await cli(['rule', 'remove', 'keep'], { token: ownerToken })).code).toBe(EXIT.forbidden);
    expect(
      (await cli(['rule', 'remove', 'keep-ws', '--workspace', 'team/private'], { token: outsiderToken })).code,
    ).toBe(EXIT.notFound);
    expect((await cli(['rule', 'remove', 'keep'], { token: null })).code).toBe(EXIT.auth);
    expect((await cli(['rule', 'remove', 'ke\u0000ep'])).code).toBe(EXIT.invalidInput);
    expect((await ok(t, '{ siteRules { name } }')).siteRules).toEqual([{ name: 'keep' }]);
  });
});
