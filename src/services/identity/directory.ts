import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { GroupSchema, type Group } from '../../storage/entities/group.js';
import { ScopeSchema, type Scope } from '../../storage/entities/scope.js';
import { UserSchema, type User } from '../../storage/entities/user.js';
import { WORKSPACE_ROLES, WorkspaceMemberSchema, type WorkspaceRole } from '../../storage/entities/workspace-member.js';
import { WorkspaceSchema, type Workspace } from '../../storage/entities/workspace.js';
import { AlreadyExistsError, ERROR_CODES, ForbiddenError, InputError, NotFoundError } from '../../core/errors.js';
import { LIST_MAXIMA } from '../input/list-maxima.js';
import { isAdmin, requireAdmin, requireUser, type Viewer } from './auth.js';
import { issueToken } from './tokens.js';
import { nameSchema, parseInput, splitWorkspaceName } from '../input/validate.js';
import { creating } from '../input/flush.js';
import { viewerSeesWorkspace } from './visibility.js';

/** Finds a workspace by `scope/name`; a private one the viewer may not see is reported as not found. */
export async function findWorkspace(em: EntityManager, viewer: Viewer, full: string, path: string): Promise<Workspace> {
  const { scope, name } = splitWorkspaceName(full, path);
  const workspace = await em.findOne(WorkspaceSchema, { name, scope: { name: scope } }, { populate: ['scope'] });
  if (!workspace || !(await viewerSeesWorkspace(em, viewer, workspace))) {
    throw new NotFoundError(`${path}: no workspace "${full}"`, path);
  }
  return workspace;
}

/** The viewer's role in a workspace, or null. */
export async function roleIn(em: EntityManager, viewer: Viewer, workspace: Workspace): Promise<WorkspaceRole | null> {
  if (viewer.kind !== 'user') return null;
  const member = await em.findOne(WorkspaceMemberSchema, { workspace, user: viewer.user });
  return member?.role ?? null;
}

/** Creates a user and returns a token for it (shown once). Admin only. */
export async function createUser(
  em: EntityManager,
  viewer: Viewer,
  input: { username: string; isAdmin?: boolean | null },
): Promise<{ user: User; token: string }> {
  requireAdmin(viewer);
  const username = parseInput(nameSchema, input.username, 'input.username');
  if (await em.count(UserSchema, { username })) throw new AlreadyExistsError(`a user "${username}" already exists`);
  const user = em.create(UserSchema, { username, isAdmin: input.isAdmin ?? false });
  const { value } = issueToken(em, { kind: input.isAdmin ? 'admin' : 'user', user, label: `created for ${username}` });
  await creating(`a user "${username}"`, () => em.flush());
  return { user, token: value };
}

/**
 * The scope of this name, created when missing. Concurrent callers may create it at once: the insert
 * yields to the one that wins (`on conflict do nothing`) and everybody reads the row that is there,
 * so that no caller fails for a scope it did not ask to create. Call it once the input is checked.
 */
async function findOrCreateScope(em: EntityManager, name: string): Promise<Scope> {
  await em.execute('insert into scope (name, created_at) values (?, now()) on conflict (name) do nothing', [name]);
  return em.findOneOrFail(ScopeSchema, { name });
}

const workspaceInput = z.object({
  isPublic: z.boolean().nullish(),
  providableTagPrefixes: z.array(z.string().min(1).max(255)).max(100).nullish(),
});

/** Creates a workspace `scope/name` (the scope too, when new). Admin only. */
export async function createWorkspace(
  em: EntityManager,
  viewer: Viewer,
  input: { name: string; isPublic?: boolean | null; providableTagPrefixes?: string[] | null },
): Promise<Workspace> {
  requireAdmin(viewer);
  const { scope: scopeName, name } = splitWorkspaceName(input.name, 'input.name');
  parseInput(nameSchema, scopeName, 'input.name(scope)');
  parseInput(nameSchema, name, 'input.name(workspace)');
  const fields = parseInput(workspaceInput, input, 'input');
  const scope = await findOrCreateScope(em, scopeName);
  if (await em.count(WorkspaceSchema, { scope, name })) {
    throw new AlreadyExistsError(`a workspace "${input.name}" already exists`);
  }
  const workspace = em.create(WorkspaceSchema, {
    scope,
    name,
    isPublic: fields.isPublic ?? true,
    providableTagPrefixes: fields.providableTagPrefixes ?? [],
  });
  await creating(`a workspace "${input.name}"`, () => em.flush());
  return workspace;
}

/** Changes a workspace's visibility or the tag prefixes its members may provide. Admins and owners. */
export async function updateWorkspace(
  em: EntityManager,
  viewer: Viewer,
  input: { name: string; isPublic?: boolean | null; providableTagPrefixes?: string[] | null },
): Promise<Workspace> {
  const workspace = await findWorkspace(em, viewer, input.name, 'input.name');
  if (!isAdmin(viewer) && (await roleIn(em, viewer, workspace)) !== 'owner') {
    throw new ForbiddenError('only admins and workspace owners may change a workspace');
  }
  const fields = parseInput(workspaceInput, input, 'input');
  if (fields.isPublic != null) workspace.isPublic = fields.isPublic;
  if (fields.providableTagPrefixes != null) workspace.providableTagPrefixes = fields.providableTagPrefixes;
  await em.flush();
  return workspace;
}

/** Adds a user to a workspace with a role, or changes the role. Admins and owners. */
export async function setWorkspaceMember(
  em: EntityManager,
  viewer: Viewer,
  input: { workspace: string; username: string; role?: WorkspaceRole | null },
): Promise<Workspace> {
  const workspace = await findWorkspace(em, viewer, input.workspace, 'input.workspace');
  if (!isAdmin(viewer) && (await roleIn(em, viewer, workspace)) !== 'owner') {
    throw new ForbiddenError('only admins and workspace owners may change members');
  }
  const role = parseInput(z.enum(WORKSPACE_ROLES), input.role ?? 'contributor', 'input.role');
  const user = await em.findOne(UserSchema, { username: input.username });
  if (!user) throw new NotFoundError(`input.username: no user "${input.username}"`, 'input.username');
  // One transaction: the workspace's row orders concurrent additions, so that the count of members
  // holds until the new one is committed; the upsert lets the last role win for the same pair.
  await em.transactional(async (tx) => {
    await tx.execute('select id from workspace where id = ? for update', [workspace.id]);
    const [counted] = await tx.execute<{ members: string; present: string }[]>(
      'select count(*) as members, count(*) filter (where user_id = ?) as present from workspace_member where workspace_id = ?',
      [user.id, workspace.id],
    );
    if (Number(counted!.present) === 0 && Number(counted!.members) >= LIST_MAXIMA.membersPerWorkspace) {
      throw new InputError(
        ERROR_CODES.INVALID_INPUT,
        `input.username: a workspace holds at most ${LIST_MAXIMA.membersPerWorkspace} members (groups hold more people)`,
        'input.username',
      );
    }
    await tx.execute(
      `insert into workspace_member (workspace_id, user_id, role) values (?, ?, ?)
       on conflict (workspace_id, user_id) do update set role = excluded.role`,
      [workspace.id, user.id, role],
    );
  });
  await em.findOne(WorkspaceMemberSchema, { workspace, user }, { refresh: true }); // what this session shows next is the stored role
  return workspace;
}

/**
 * Removes a user from a workspace. Admins and owners; a user who is not a member is NOT_FOUND (as is
 * a workspace the viewer may not see). An owner may remove any member, the last owner included: an
 * admin can still change the workspace then.
 */
export async function removeWorkspaceMember(
  em: EntityManager,
  viewer: Viewer,
  input: { workspace: string; username: string },
): Promise<Workspace> {
  requireUser(viewer);
  const workspace = await findWorkspace(em, viewer, input.workspace, 'input.workspace');
  if (!isAdmin(viewer) && (await roleIn(em, viewer, workspace)) !== 'owner') {
    throw new ForbiddenError('only admins and workspace owners may change members');
  }
  const user = await em.findOne(UserSchema, { username: input.username });
  const removed = user ? await em.nativeDelete(WorkspaceMemberSchema, { workspace, user }) : 0;
  if (!removed)
    throw new NotFoundError(
      `input.username: "${input.username}" is not a member of "${input.workspace}"`,
      'input.username',
    );
  return workspace;
}

/** One page of users by name, after the name `after` (exclusive). Admin only: the list names every account. */
export async function listUsers(
  em: EntityManager,
  viewer: Viewer,
  page: { after: string | null; limit: number },
): Promise<User[]> {
  requireAdmin(viewer);
  return em.find(UserSchema, page.after === null ? {} : { username: { $gt: page.after } }, {
    orderBy: { username: 'asc' },
    limit: page.limit,
  });
}

/** Creates a group in a scope (optionally tied to a workspace `scope/name`). Admin only. */
export async function createGroup(
  em: EntityManager,
  viewer: Viewer,
  input: { scope: string; name: string; workspace?: string | null },
): Promise<Group> {
  requireAdmin(viewer);
  const scopeName = parseInput(nameSchema, input.scope, 'input.scope');
  const name = parseInput(nameSchema, input.name, 'input.name');
  const workspace = input.workspace ? await findWorkspace(em, viewer, input.workspace, 'input.workspace') : null;
  if (workspace && workspace.scope.name !== scopeName) {
    throw new NotFoundError(`input.workspace: "${input.workspace}" is not in scope "${scopeName}"`, 'input.workspace');
  }
  const scope = workspace ? workspace.scope : await findOrCreateScope(em, scopeName);
  if (await em.count(GroupSchema, { scope, name, workspace })) {
    throw new AlreadyExistsError(`a group "${name}" already exists there`);
  }
  const group = em.create(GroupSchema, { scope, name, workspace });
  await creating(`a group "${name}"`, () => em.flush());
  return group;
}

/** Adds users to a group. Admin only. */
export async function addGroupMembers(
  em: EntityManager,
  viewer: Viewer,
  input: { groupId: number; usernames: string[] },
): Promise<Group> {
  requireAdmin(viewer);
  // One transaction: the group's row orders concurrent additions, so that the count of members holds.
  return em.transactional(async (tx) => {
    await tx.execute('select id from user_group where id = ? for update', [input.groupId]);
    return addLocked(tx, input);
  });
}

async function addLocked(em: EntityManager, input: { groupId: number; usernames: string[] }): Promise<Group> {
  const group = await em.findOne(GroupSchema, { id: input.groupId }, { populate: ['members', 'scope'] });
  if (!group) throw new NotFoundError(`input.group: no group ${input.groupId}`, 'input.group');
  const users = await em.find(UserSchema, { username: { $in: input.usernames } });
  const missing = input.usernames.filter((u) => !users.some((x) => x.username === u));
  if (missing.length)
    throw new NotFoundError(`input.usernames: no user ${missing.map((m) => `"${m}"`).join(', ')}`, 'input.usernames');
  const added = new Set([...group.members.getItems().map((u) => u.id), ...users.map((u) => u.id)]);
  if (added.size > LIST_MAXIMA.membersPerGroup) {
    throw new InputError(
      ERROR_CODES.INVALID_INPUT,
      `input.usernames: a group holds at most ${LIST_MAXIMA.membersPerGroup} members`,
      'input.usernames',
    );
  }
  for (const user of users) group.members.add(user);
  await em.flush();
  return group;
}
