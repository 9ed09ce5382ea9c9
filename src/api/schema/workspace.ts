import { builder } from '../builder.js';
import { describedValues, upperSnake } from './enum-values.js';
import {
  AlreadyExistsError,
  ForbiddenError,
  InputError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import { GroupSchema, type Group } from '../../storage/entities/group.js';
import type { TaskRule } from '../../storage/entities/task-rule.js';
import { UserSchema, type User } from '../../storage/entities/user.js';
import { WORKSPACE_ROLES, WorkspaceMemberSchema } from '../../storage/entities/workspace-member.js';
import { WorkspaceSchema, type Workspace } from '../../storage/entities/workspace.js';
import {
  addGroupMembers,
  createGroup,
  createUser,
  createWorkspace,
  listUsers,
  removeWorkspaceMember,
  setWorkspaceMember,
  updateWorkspace,
} from '../../services/identity/directory.js';
import { visibleGroups, visibleWorkspace, visibleWorkspaces } from '../../services/identity/directory-reads.js';
import { audienceOf, canSeeGroupMembers, canSeeWorkspaceMembers } from '../../services/identity/visibility.js';
import { createTaskRule, deleteTaskRule, siteRules, workspaceRules } from '../../services/work/task-rules.js';
import { ResourcesInput, ResourcesPartialRef } from './resources.js';
import { decodeCursor, encodeCursor, firstDescription, firstOf, pageSize, toConnection } from './pagination.js';
import { PAGE } from '../limits/page.js';
import { adminsOnly } from '../../services/work/idempotency.js';
import { createOnce, IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';

const WorkspaceRoleEnum = builder.enumType('WorkspaceRole', {
  description: "A member's role in a workspace",
  values: describedValues<(typeof WORKSPACE_ROLES)[number]>(
    {
      owner: 'Changes the workspace, its members and its rules, and submits and aborts its work',
      contributor: 'Submits work to the workspace and aborts their own',
      viewer: 'Sees the workspace and its work (when it is private)',
    },
    upperSnake,
  ),
});

/** A user, as others see it (a name; never its tokens). */
export const UserRef = builder.loadableObjectRef<User, number>('User', {
  load: async (ids, ctx) =>
    (await ctx.loaders.byId<User>(UserSchema).loadMany(ids)).map((u, i) => u ?? new Error(`no user ${ids[i]}`)),
});
UserRef.implement({
  description: 'A person or script account, as others see it: its name, never its tokens',
  fields: (t) => ({
    username: t.exposeString('username', { description: 'Its unique name' }),
    isAdmin: t.exposeBoolean('isAdmin', { description: 'Whether it has admin rights' }),
  }),
});

/** A workspace, written `scope/name`. */
export const WorkspaceRef = builder.loadableObjectRef<Workspace, number>('Workspace', {
  load: async (ids, ctx) =>
    (await ctx.loaders.byId<Workspace>(WorkspaceSchema, ['scope']).loadMany(ids)).map(
      (w, i) => w ?? new Error(`no workspace ${ids[i]}`),
    ),
});

const MemberRef = builder
  .objectRef<{ user: User; role: (typeof WORKSPACE_ROLES)[number] }>('WorkspaceMember')
  .implement({
    description: 'A member of a workspace and its role',
    fields: (t) => ({
      user: t.field({ type: UserRef, description: 'The member', resolve: (m) => m.user }),
      role: t.field({ type: WorkspaceRoleEnum, description: 'What it may do there', resolve: (m) => m.role }),
    }),
  });

/** A task rule of a workspace or of the site. */
export const TaskRuleRef = builder.objectRef<TaskRule>('TaskRule').implement({
  description:
    'Tags added to the work requests a rule matches (by task name and/or a tag expression) when they are created',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Its name, unique in its workspace (or among site rules)' }),
    workspace: t.field({
      type: WorkspaceRef,
      nullable: true,
      description: 'Null for a site rule',
      resolve: (r) => r.workspace?.id ?? null,
    }),
    taskName: t.exposeString('taskName', {
      nullable: true,
      description: 'Only work requests of this task; null: any task',
    }),
    expression: t.exposeString('expression', {
      nullable: true,
      description: "Only when the request's tags match this expression; null: always",
    }),
    providedTags: t.exposeStringList('providedTags', { description: 'Tags it adds to the provided side' }),
    requiredTags: t.exposeStringList('requiredTags', { description: 'Tags it adds to the required side' }),
    resources: t.field({
      type: ResourcesPartialRef,
      nullable: true,
      description: 'What the requests it matches reserve of a worker that shares its resources; null when it sets none',
      resolve: (r) => r.resources ?? null,
    }),
  }),
});

WorkspaceRef.implement({
  description:
    'Where work is submitted, written scope/name; public ones are seen by everyone, private ones by their members and admins',
  fields: (t) => ({
    name: t.string({ description: 'scope/name', resolve: (w) => `${w.scope.name}/${w.name}` }),
    scope: t.string({ description: 'The scope part of its name', resolve: (w) => w.scope.name }),
    isPublic: t.exposeBoolean('isPublic', {
      description: 'Whether everyone (anonymous callers too) sees it and its work',
    }),
    providableTagPrefixes: t.exposeStringList('providableTagPrefixes', {
      description: 'Task-provided tag prefixes members may set',
    }),
    // Lists of workspaces batch these three per operation: one query each, whatever the length.
    viewerRole: t.loadable({
      type: WorkspaceRoleEnum,
      nullable: true,
      description: "The caller's role in it; null when the caller is not a member",
      load: async (ids: number[], ctx) => {
        if (ctx.viewer.kind !== 'user') return ids.map(() => null);
        const mine = await ctx.em.find(WorkspaceMemberSchema, { workspace: { $in: ids }, user: ctx.viewer.user });
        return ids.map((id) => mine.find((m) => m.workspace.id === id)?.role ?? null);
      },
      resolve: (w) => w.id,
    }),
    members: t.loadableList({
      type: MemberRef,
      description: 'Visible to admins and the workspace members',
      load: async (ids: number[], ctx) => {
        const audience = await audienceOf(ctx.em, ctx.viewer);
        const shown = ids.filter((id) => canSeeWorkspaceMembers(audience, { id, isPublic: false }));
        const members = shown.length
          ? await ctx.em.find(
              WorkspaceMemberSchema,
              { workspace: { $in: shown } },
              { populate: ['user'], orderBy: { user: { username: 'asc' } } },
            )
          : [];
        return ids.map((id) =>
          members.filter((m) => m.workspace.id === id).map((m) => ({ user: m.user, role: m.role })),
        );
      },
      resolve: (w) => w.id,
    }),
    rules: t.loadableGroup({
      type: TaskRuleRef,
      description:
        'Visible with the workspace (a worker reaching a private workspace through its assignment sees none)',
      load: (ids: number[], ctx) => workspaceRules(ctx.em, ctx.viewer, ids),
      group: (rule) => rule.workspace!.id,
      resolve: (w) => w.id,
    }),
  }),
});

const GroupRef = builder.objectRef<Group>('Group').implement({
  description: 'A group of users in a scope; work its members submit gets a task:group:* tag',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Its id, for addGroupMembers' }),
    name: t.exposeString('name', { description: 'Its name, unique in its scope (or workspace)' }),
    scope: t.string({ description: 'The scope it belongs to', resolve: (g) => g.scope.name }),
    workspace: t.field({
      type: WorkspaceRef,
      nullable: true,
      description: 'The workspace it is tied to; null for a scope-wide group',
      resolve: (g) => g.workspace?.id ?? null,
    }),
    members: t.loadableList({
      type: UserRef,
      description: 'Visible to admins and the group members',
      load: async (ids: number[], ctx) => {
        const audience = await audienceOf(ctx.em, ctx.viewer);
        const shown = ids.filter((id) => canSeeGroupMembers(audience, { id }));
        const groups = shown.length
          ? await ctx.em.find(GroupSchema, { id: { $in: shown } }, { populate: ['members'] })
          : [];
        return ids.map((id) => {
          const members = groups.find((g) => g.id === id)?.members.getItems() ?? [];
          return members.slice().sort((a, b) => a.username.localeCompare(b.username));
        });
      },
      resolve: (g) => g.id,
    }),
  }),
});

const UserTokenPayload = builder.objectRef<{ user: User; token: string }>('UserTokenPayload').implement({
  description: 'A new user and its first token',
  fields: (t) => ({
    user: t.field({ type: UserRef, description: 'The user', resolve: (p) => p.user }),
    token: t.exposeString('token', { description: 'Shown once' }),
  }),
});

const UserConnection = builder.connectionObject(
  { type: UserRef, name: 'UserConnection', description: 'A page of users, by name' },
  { description: 'A user of the page' },
);

builder.queryFields((t) => ({
  users: t.field({
    type: UserConnection,
    description: 'Admin: every user account, by name (FORBIDDEN for others, UNAUTHENTICATED without a token)',
    args: {
      first: t.arg.int({ description: `How many users, at most (default ${PAGE.default}, at most ${PAGE.max})` }),
      after: t.arg.string({ description: "The previous page's pageInfo.endCursor" }),
    },
    resolve: async (_r, args, ctx) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is string => typeof v === 'string');
      const rows = await listUsers(ctx.em, ctx.viewer, { after, limit: size + 1 });
      return toConnection(rows, size, (u) => encodeCursor(u.username), after !== null);
    },
  }),
  workspaces: t.field({
    type: [WorkspaceRef],
    description: 'Public workspaces, and private ones the viewer belongs to, by name',
    args: { first: t.arg.int({ description: firstDescription('Query.workspaces', 'workspaces') }) },
    resolve: (_r, args, ctx) => visibleWorkspaces(ctx.em, ctx.viewer, firstOf('Query.workspaces', args.first)),
  }),
  workspace: t.field({
    type: WorkspaceRef,
    nullable: true,
    description: 'A workspace by name (scope/name); null when there is none or the viewer may not see it',
    args: { name: t.arg.string({ required: true, description: 'scope/name' }) },
    resolve: async (_r, { name }, ctx) => {
      const slash = name.indexOf('/');
      if (slash < 0) return null;
      return visibleWorkspace(ctx.em, ctx.viewer, name.slice(0, slash), name.slice(slash + 1));
    },
  }),
  siteRules: t.field({
    type: [TaskRuleRef],
    description: 'The rules of the site (those without a workspace), by name',
    resolve: (_r, _a, ctx) => siteRules(ctx.em, ctx.viewer),
  }),
  groups: t.field({
    type: [GroupRef],
    description:
      'The groups of a scope the viewer may see: with their workspace, or with some workspace of the scope for scope-wide groups',
    args: {
      scope: t.arg.string({ required: true, description: 'The scope, e.g. debian' }),
      first: t.arg.int({ description: firstDescription('Query.groups', 'groups') }),
    },
    resolve: (_r, { scope, first }, ctx) => visibleGroups(ctx.em, ctx.viewer, scope, firstOf('Query.groups', first)),
  }),
  me: t.field({
    type: UserRef,
    nullable: true,
    description: 'The user of the bearer token, if it is a user token',
    resolve: (_r, _a, ctx) => (ctx.viewer.kind === 'user' ? ctx.viewer.user : null),
  }),
}));

const WorkspaceInput = builder.inputType('WorkspaceInput', {
  description: 'A workspace to create, or (by name) the fields of one to change',
  fields: (t) => ({
    name: t.string({ required: true, description: 'scope/name' }),
    isPublic: t.boolean({ description: 'Whether everyone sees it and its work (default on create: true)' }),
    providableTagPrefixes: t.stringList({
      description: 'Task-provided tag prefixes its members may set, e.g. task:team:',
    }),
  }),
});

builder.mutationFields((t) => ({
  createUser: t.field({
    type: UserTokenPayload,
    description: 'Admin: creates a user and returns its token (shown once)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, AlreadyExistsError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateUserInput', {
          description: 'A new user',
          fields: (f) => ({
            username: f.string({ required: true, description: 'Its unique name' }),
            isAdmin: f.boolean({ description: 'Whether it has admin rights (default false)' }),
          }),
        }),
        required: true,
        description: 'The user to create',
      }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) =>
      createOnce<{ user: User; token: string }>(
        ctx,
        'createUser',
        idempotencyKey,
        input,
        {
          idOf: (r) => r.user.id,
          secretOf: (r) => r.token,
          replay: async (em, id, token) => ({ user: await em.findOneOrFail(UserSchema, { id }), token: token ?? '' }),
          mayRead: adminsOnly,
        },
        (tx) => createUser(tx, ctx.viewer, input),
      ),
  }),
  createWorkspace: t.field({
    type: WorkspaceRef,
    description: 'Admin: creates a workspace (and its scope when new)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, AlreadyExistsError] },
    args: {
      input: t.arg({ type: WorkspaceInput, required: true, description: 'The workspace to create' }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) =>
      createOnce<Workspace>(
        ctx,
        'createWorkspace',
        idempotencyKey,
        input,
        {
          idOf: (w) => w.id,
          replay: (em, id) => em.findOneOrFail(WorkspaceSchema, { id }, { populate: ['scope'] }),
          mayRead: adminsOnly,
        },
        (tx) => createWorkspace(tx, ctx.viewer, input),
      ),
  }),
  updateWorkspace: t.field({
    type: WorkspaceRef,
    description: 'Admins and owners: visibility and the tag prefixes members may provide',
    errors: { types: [InputError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: WorkspaceInput,
        required: true,
        description: 'The workspace (by name) and the fields to change; omitted fields are unchanged',
      }),
    },
    resolve: (_r, { input }, ctx) => updateWorkspace(ctx.em, ctx.viewer, input),
  }),
  setWorkspaceMember: t.field({
    type: WorkspaceRef,
    description: 'Admins and owners: adds a member or changes its role',
    errors: { types: [InputError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('SetWorkspaceMemberInput', {
          description: 'A workspace, a user and the role to give it',
          fields: (f) => ({
            workspace: f.string({ required: true, description: 'The workspace, written scope/name' }),
            username: f.string({ required: true, description: 'The user' }),
            role: f.field({ type: WorkspaceRoleEnum, description: 'Its role (default CONTRIBUTOR)' }),
          }),
        }),
        required: true,
        description: 'The workspace, the user and the role',
      }),
    },
    resolve: (_r, { input }, ctx) => setWorkspaceMember(ctx.em, ctx.viewer, input),
  }),
  removeWorkspaceMember: t.field({
    type: WorkspaceRef,
    description: 'Admins and owners: removes a member from the workspace (NOT_FOUND when the user is not one)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('RemoveWorkspaceMemberInput', {
          description: 'A workspace and the member to remove from it',
          fields: (f) => ({
            workspace: f.string({ required: true, description: 'The workspace, written scope/name' }),
            username: f.string({ required: true, description: 'The member to remove' }),
          }),
        }),
        required: true,
        description: 'The workspace and the member to remove',
      }),
    },
    resolve: (_r, { input }, ctx) => removeWorkspaceMember(ctx.em, ctx.viewer, input),
  }),
  createGroup: t.field({
    type: GroupRef,
    description: 'Admin: a group in a scope, optionally tied to a workspace; its members get task:group:* tags',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, AlreadyExistsError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateGroupInput', {
          description: 'A group to create',
          fields: (f) => ({
            scope: f.string({ required: true, description: 'The scope it belongs to' }),
            name: f.string({ required: true, description: 'Its name' }),
            workspace: f.string({
              description: 'The workspace (scope/name, in that scope) it is tied to; omitted: scope-wide',
            }),
          }),
        }),
        required: true,
        description: 'The group to create',
      }),
    },
    resolve: (_r, { input }, ctx) => createGroup(ctx.em, ctx.viewer, input),
  }),
  addGroupMembers: t.field({
    type: GroupRef,
    description: 'Admin: adds users to a group',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('AddGroupMembersInput', {
          description: 'A group and the users to add to it',
          fields: (f) => ({
            group: f.id({ required: true, description: "The group's id" }),
            usernames: f.stringList({ required: true, description: 'The users to add, by name' }),
          }),
        }),
        required: true,
        description: 'The group and the users to add',
      }),
    },
    resolve: (_r, { input }, ctx) =>
      addGroupMembers(ctx.em, ctx.viewer, { groupId: Number(input.group), usernames: input.usernames }),
  }),
  createTaskRule: t.field({
    type: TaskRuleRef,
    description: 'A workspace rule (admins and owners) or, without workspace, a site rule (admins)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, AlreadyExistsError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateTaskRuleInput', {
          description: 'A rule to add',
          fields: (f) => ({
            workspace: f.string({ description: 'The workspace (scope/name) of the rule; omitted for a site rule' }),
            name: f.string({ required: true, description: 'Its name, unique in its workspace (or among site rules)' }),
            taskName: f.string({ description: 'Only work requests of this task; omitted: any task' }),
            expression: f.string({
              description: 'e.g. "task:source-package:linux or task:source-package:libreoffice"',
            }),
            providedTags: f.stringList({ description: 'Tags to add to the provided side' }),
            requiredTags: f.stringList({ description: 'Tags to add to the required side' }),
            resources: f.field({
              type: ResourcesInput,
              description:
                'What the requests it matches reserve of a worker that shares its resources; a workspace rule’s figures win over a site rule’s, a user’s over both (the largest of several rules)',
            }),
          }),
        }),
        required: true,
        description: 'The rule to add',
      }),
    },
    resolve: (_r, { input }, ctx) => createTaskRule(ctx.em, ctx.viewer, ctx.config.input, input),
  }),
  deleteTaskRule: t.field({
    type: TaskRuleRef,
    description:
      'Deletes a workspace rule (admins and owners) or, without workspace, a site rule (admins); answers the rule as it was. Work requests already created keep the tags it gave them',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('DeleteTaskRuleInput', {
          description: 'The rule to delete: its workspace (none for a site rule) and its name',
          fields: (f) => ({
            workspace: f.string({
              description: 'The workspace of the rule, written scope/name; omitted for a site rule',
            }),
            name: f.string({ required: true, description: 'The name of the rule' }),
          }),
        }),
        required: true,
        description: 'The rule to delete',
      }),
    },
    resolve: (_r, { input }, ctx) => deleteTaskRule(ctx.em, ctx.viewer, input),
  }),
}));
