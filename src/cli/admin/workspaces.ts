/**
 * Workspaces: create, list, show, update; their members (`workspace member add|remove|list`) and the
 * task-provided tag prefixes their members may set (`workspace grant add|remove|list`).
 */
import type { Command } from 'commander';
import { collect, enumArg, items } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { AdminError, EXIT, usageError } from './exit-codes.js';
import { heading, list, renderFields, renderTable } from './output.js';
import type { Ctx, Register } from './command-context.js';
import { ruleTable, type RuleRow, RULE_FIELDS } from './rules.js';

const ROLES = ['VIEWER', 'CONTRIBUTOR', 'OWNER'] as const;

const WORKSPACE_FIELDS = `name scope isPublic providableTagPrefixes viewerRole`;

interface WorkspaceRow {
  name: string;
  scope: string;
  isPublic: boolean;
  providableTagPrefixes: string[];
  viewerRole: string | null;
  members?: { role: string; user: { username: string; isAdmin: boolean } }[];
  rules?: RuleRow[];
}

const WORKSPACES = `query Workspaces { workspaces { ${WORKSPACE_FIELDS} } }`;
const WORKSPACE_IN_FULL = `query Workspace($name: String!) { workspace(name: $name) { ${WORKSPACE_FIELDS} members { role user { username isAdmin } } rules { ${RULE_FIELDS} } } }`;
const CREATE = `mutation CreateWorkspace($input: WorkspaceInput!, $key: String) {
  createWorkspace(input: $input, idempotencyKey: $key) { ${ERROR_SELECTION} ... on Workspace { ${WORKSPACE_FIELDS} } }
}`;
const UPDATE = `mutation UpdateWorkspace($input: WorkspaceInput!) { updateWorkspace(input: $input) { ${ERROR_SELECTION} ... on Workspace { ${WORKSPACE_FIELDS} } } }`;
const SET_MEMBER = `mutation SetMember($input: SetWorkspaceMemberInput!) {
  setWorkspaceMember(input: $input) { ${ERROR_SELECTION} ... on Workspace { name members { role user { username } } } }
}`;
const REMOVE_MEMBER = `mutation RemoveMember($input: RemoveWorkspaceMemberInput!) {
  removeWorkspaceMember(input: $input) { ${ERROR_SELECTION} ... on Workspace { name } }
}`;

function checkName(name: string): string {
  if (!/^[^/\s]+\/[^/\s]+$/.test(name))
    throw usageError(`a workspace is named SCOPE/NAME, e.g. debian/main; got ${JSON.stringify(name)}`);
  return name;
}

/** The workspace of that name among those the viewer may see; NOT_FOUND (exit 3) otherwise. */
async function findWorkspace(
  ctx: Ctx,
  name: string,
  full: boolean,
): Promise<{ data: { workspaces: WorkspaceRow[] }; workspace: WorkspaceRow }> {
  const data = full
    ? await ctx
        .api()
        .query<{ workspace: WorkspaceRow | null }>(WORKSPACE_IN_FULL, { name: checkName(name) })
        .then((d) => ({ workspaces: d.workspace ? [d.workspace] : [] }))
    : await ctx.api().query<{ workspaces: WorkspaceRow[] }>(WORKSPACES);
  const workspace = data.workspaces.find((w) => w.name === checkName(name));
  if (!workspace)
    throw new AdminError(
      `no workspace named ${JSON.stringify(name)} (or you may not see it)`,
      EXIT.notFound,
      'NOT_FOUND',
    );
  return { data, workspace };
}

async function create(ctx: Ctx, name: string, opts: { private?: boolean; grant?: string[]; idempotencyKey?: string }) {
  const input = { name: checkName(name), isPublic: !opts.private, providableTagPrefixes: items(opts.grant) };
  const data = await ctx.api().mutate(CREATE, { input, key: opts.idempotencyKey ?? null }, 'createWorkspace');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const w = data.createWorkspace as WorkspaceRow;
  ctx.out.line(
    `Created workspace ${w.name} (${w.isPublic ? 'public' : 'private'}${w.providableTagPrefixes.length ? `; members may provide ${list(w.providableTagPrefixes)}` : ''}).`,
  );
}

async function listWorkspaces(ctx: Ctx) {
  const data = await ctx.api().query<{ workspaces: WorkspaceRow[] }>(WORKSPACES);
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(
    renderTable(ctx.out, data.workspaces, [
      { header: 'NAME', value: (w) => w.name },
      { header: 'VISIBILITY', value: (w) => (w.isPublic ? 'public' : 'private') },
      { header: 'YOUR ROLE', value: (w) => w.viewerRole?.toLowerCase() },
      { header: 'MEMBERS MAY PROVIDE', value: (w) => list(w.providableTagPrefixes), shrink: true },
    ]),
  );
}

async function show(ctx: Ctx, name: string) {
  const { workspace: w } = await findWorkspace(ctx, name, true);
  if (ctx.out.json) return ctx.out.writeJson({ workspace: w });
  const { out } = ctx;
  out.write(
    renderFields(out, [
      ['Workspace', w.name],
      ['Visibility', w.isPublic ? 'public' : 'private'],
      ['Your role', w.viewerRole?.toLowerCase()],
      ['Members may provide', list(w.providableTagPrefixes)],
    ]),
  );
  out.write(heading(out, 'Members'));
  out.write(
    renderTable(out, w.members ?? [], [
      { header: 'USER', value: (m) => m.user.username },
      { header: 'ROLE', value: (m) => m.role.toLowerCase() },
      { header: 'ADMIN', value: (m) => (m.user.isAdmin ? 'yes' : 'no') },
    ]),
  );
  out.write(heading(out, 'Task rules'));
  out.write(ruleTable(out, w.rules ?? []));
}

async function update(ctx: Ctx, name: string, opts: { public?: boolean; private?: boolean }) {
  if (opts.public === opts.private) throw usageError('give --public or --private');
  const data = await ctx
    .api()
    .mutate(UPDATE, { input: { name: checkName(name), isPublic: opts.public === true } }, 'updateWorkspace');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(
    `Workspace ${data.updateWorkspace.name} is now ${data.updateWorkspace.isPublic ? 'public' : 'private'}.`,
  );
}

async function addMember(ctx: Ctx, workspace: string, username: string, opts: { role: string }) {
  const role = enumArg('--role', opts.role, ROLES);
  const data = await ctx
    .api()
    .mutate(SET_MEMBER, { input: { workspace: checkName(workspace), username, role } }, 'setWorkspaceMember');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(`${username} is ${role.toLowerCase()} of ${data.setWorkspaceMember.name}.`);
}

async function removeMember(ctx: Ctx, workspace: string, username: string) {
  const data = await ctx
    .api()
    .mutate(REMOVE_MEMBER, { input: { workspace: checkName(workspace), username } }, 'removeWorkspaceMember');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(`${username} is no longer a member of ${data.removeWorkspaceMember.name}.`);
}

async function listMembers(ctx: Ctx, name: string) {
  const { workspace } = await findWorkspace(ctx, name, true);
  if (ctx.out.json) return ctx.out.writeJson({ workspace: { name: workspace.name, members: workspace.members } });
  ctx.out.write(
    renderTable(ctx.out, workspace.members ?? [], [
      { header: 'USER', value: (m) => m.user.username },
      { header: 'ROLE', value: (m) => m.role.toLowerCase() },
    ]),
  );
}

/** Grants or withdraws prefixes: the workspace's list is read, changed and written whole. */
async function changeGrants(ctx: Ctx, name: string, prefixes: string[], change: 'add' | 'remove') {
  const { workspace } = await findWorkspace(ctx, name, false);
  const given = items(prefixes);
  const current = workspace.providableTagPrefixes;
  const next =
    change === 'add'
      ? [...current, ...given.filter((p) => !current.includes(p))]
      : current.filter((p) => !given.includes(p));
  const data = await ctx
    .api()
    .mutate(UPDATE, { input: { name: workspace.name, providableTagPrefixes: next } }, 'updateWorkspace');
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.line(`Members of ${workspace.name} may provide: ${list(data.updateWorkspace.providableTagPrefixes)}.`);
}

async function listGrants(ctx: Ctx, name: string) {
  const { workspace } = await findWorkspace(ctx, name, false);
  if (ctx.out.json)
    return ctx.out.writeJson({
      workspace: { name: workspace.name, providableTagPrefixes: workspace.providableTagPrefixes },
    });
  for (const p of workspace.providableTagPrefixes) ctx.out.line(p);
  if (!workspace.providableTagPrefixes.length) ctx.out.line(ctx.out.color.dim('(none: members may provide no tags)'));
}

export const registerWorkspaceCommands: Register = (program: Command, action) => {
  const ws = program
    .command('workspace')
    .description('Workspaces, their members and the tags their members may provide');
  action(
    ws
      .command('create <scope/name>')
      .description('Creates a workspace (and its scope when new); admins only')
      .option('--private', 'visible to its members only (default: public)')
      .option('--grant <prefix>', 'a task-provided tag prefix members may set (repeatable)', collect)
      .option('--idempotency-key <key>', 'a retry with the same key answers the first create')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin workspace create debian/main\n  tagsched-admin workspace create debian/security --private --grant task:security:',
      ),
    (ctx, [name], opts) => create(ctx, name, opts),
  );
  action(
    ws
      .command('list')
      .description('Lists the workspaces you may see')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace list --json'),
    (ctx) => listWorkspaces(ctx),
  );
  action(
    ws
      .command('show <scope/name>')
      .description('Shows a workspace: visibility, grants, members and task rules')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace show debian/main'),
    (ctx, [name]) => show(ctx, name),
  );
  action(
    ws
      .command('update <scope/name>')
      .description('Makes a workspace public or private (admins and owners)')
      .option('--public', 'visible to everyone')
      .option('--private', 'visible to its members only')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace update debian/security --private'),
    (ctx, [name], opts) => update(ctx, name, opts),
  );

  const member = ws.command('member').description('Members of a workspace');
  action(
    member
      .command('add <scope/name> <username>')
      .description("Adds a member, or changes a member's role (admins and owners)")
      .option('--role <role>', 'viewer, contributor or owner', 'contributor')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace member add debian/main alice --role owner'),
    (ctx, [name, username], opts) => addMember(ctx, name, username, opts as { role: string }),
  );
  action(
    member
      .command('remove <scope/name> <username>')
      .description('Removes a member (admins and owners)')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace member remove debian/main alice'),
    (ctx, [name, username]) => removeMember(ctx, name, username),
  );
  action(
    member
      .command('list <scope/name>')
      .description('Lists the members (admins and members see them)')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace member list debian/main'),
    (ctx, [name]) => listMembers(ctx, name),
  );

  const grant = ws
    .command('grant')
    .description('Task-provided tag prefixes the members of a workspace may set on their work requests');
  action(
    grant
      .command('add <scope/name> <prefix...>')
      .description('Lets members provide tags under these prefixes')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace grant add debian/main task:priority: task:team:'),
    (ctx, [name, prefixes]) => changeGrants(ctx, name, prefixes as unknown as string[], 'add'),
  );
  action(
    grant
      .command('remove <scope/name> <prefix...>')
      .description('Withdraws prefixes')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace grant remove debian/main task:team:'),
    (ctx, [name, prefixes]) => changeGrants(ctx, name, prefixes as unknown as string[], 'remove'),
  );
  action(
    grant
      .command('list <scope/name>')
      .description('Lists the prefixes, one a line')
      .addHelpText('after', '\nExamples:\n  tagsched-admin workspace grant list debian/main'),
    (ctx, [name]) => listGrants(ctx, name),
  );
};
