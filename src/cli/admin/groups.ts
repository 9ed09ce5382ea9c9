/** Groups: their members get `task:group:*` tags on the work they submit (admins create them). */
import type { Command } from 'commander';
import { ERROR_SELECTION } from './client.js';
import { AdminError, EXIT } from './exit-codes.js';
import { list, renderTable } from './output.js';
import type { Ctx, Register } from './command-context.js';

interface GroupRow {
  id: string;
  name: string;
  scope: string;
  workspace: { name: string } | null;
  members: { username: string }[];
}

const GROUP_FIELDS = 'id name scope workspace { name } members { username }';
const GROUPS = `query Groups($scope: String!) { groups(scope: $scope) { ${GROUP_FIELDS} } }`;
const CREATE = `mutation CreateGroup($input: CreateGroupInput!) { createGroup(input: $input) { ${ERROR_SELECTION} ... on Group { ${GROUP_FIELDS} } } }`;
const ADD_MEMBERS = `mutation AddGroupMembers($group: ID!, $usernames: [String!]!) {
  addGroupMembers(input: { group: $group, usernames: $usernames }) { ${ERROR_SELECTION} ... on Group { ${GROUP_FIELDS} } }
}`;

/** The group of that name in the scope (and workspace, when given), among those the viewer may see. */
async function findGroup(ctx: Ctx, scope: string, name: string, workspace: string | undefined): Promise<GroupRow> {
  const data = await ctx.api().query<{ groups: GroupRow[] }>(GROUPS, { scope });
  const found = data.groups.filter(
    (g) => g.name === name && (workspace === undefined || g.workspace?.name === workspace),
  );
  if (found.length === 0)
    throw new AdminError(
      `no group ${JSON.stringify(name)} in scope ${JSON.stringify(scope)} (or you may not see it)`,
      EXIT.notFound,
      'NOT_FOUND',
    );
  if (found.length > 1)
    throw new AdminError(`several groups are named ${JSON.stringify(name)} in ${scope}: give --workspace`, EXIT.usage);
  return found[0];
}

async function create(ctx: Ctx, scope: string, name: string, opts: { workspace?: string }) {
  const data = await ctx
    .api()
    .mutate(CREATE, { input: { scope, name, workspace: opts.workspace ?? null } }, 'createGroup');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const g = data.createGroup as GroupRow;
  ctx.out.line(
    `Created group ${g.name} (id ${g.id}) in ${g.workspace ? g.workspace.name : `scope ${g.scope}`}: its members' work provides task:group:${g.scope}:${g.workspace ? g.workspace.name.split('/')[1] : ''}:${g.name}.`,
  );
}

async function listGroups(ctx: Ctx, scope: string) {
  const data = await ctx.api().query<{ groups: GroupRow[] }>(GROUPS, { scope });
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(
    renderTable(ctx.out, data.groups, [
      { header: 'ID', value: (g) => g.id, align: 'right' },
      { header: 'NAME', value: (g) => g.name },
      { header: 'WORKSPACE', value: (g) => g.workspace?.name ?? '(scope-wide)' },
      { header: 'MEMBERS', value: (g) => list(g.members.map((m) => m.username)), shrink: true },
    ]),
  );
}

async function addMembers(ctx: Ctx, scope: string, name: string, usernames: string[], opts: { workspace?: string }) {
  const group = await findGroup(ctx, scope, name, opts.workspace);
  const data = await ctx.api().mutate(ADD_MEMBERS, { group: group.id, usernames }, 'addGroupMembers');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(`Members of ${name}: ${list((data.addGroupMembers as GroupRow).members.map((m) => m.username))}.`);
}

export const registerGroupCommands: Register = (program: Command, action) => {
  const group = program.command('group').description("Groups of users; their members' work provides task:group:* tags");
  action(
    group
      .command('create <scope> <name>')
      .description('Creates a group in a scope, optionally tied to a workspace (admins)')
      .option('--workspace <scope/name>', 'tie it to this workspace')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin group create debian Debian\n  tagsched-admin group create debian security-team --workspace debian/security',
      ),
    (ctx, [scope, name], opts) => create(ctx, scope, name, opts),
  );
  action(
    group
      .command('list <scope>')
      .description('Lists the groups of a scope you may see')
      .addHelpText('after', '\nExamples:\n  tagsched-admin group list debian'),
    (ctx, [scope]) => listGroups(ctx, scope),
  );
  action(
    group
      .command('add-member <scope> <name> <username...>')
      .description('Adds users to a group (admins)')
      .option('--workspace <scope/name>', "the group's workspace, when several groups have that name")
      .addHelpText('after', '\nExamples:\n  tagsched-admin group add-member debian Debian alice bob'),
    (ctx, [scope, name, usernames], opts) => addMembers(ctx, scope, name, usernames as unknown as string[], opts),
  );
};
