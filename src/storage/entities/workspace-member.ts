import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { UserSchema } from './user.js';
import { WorkspaceSchema } from './workspace.js';

/** The roles a user can hold in a workspace; every role may submit work, owners also manage members and rules. */
export const WORKSPACE_ROLES = ['owner', 'contributor', 'viewer'] as const;
export type WorkspaceRole = (typeof WORKSPACE_ROLES)[number];

/** A user's membership of a workspace, with a role. */
export const WorkspaceMemberSchema = defineEntity({
  name: 'WorkspaceMember',
  tableName: 'workspace_member',
  properties: {
    id: p.integer().primary().autoincrement(),
    workspace: () => p.manyToOne(WorkspaceSchema),
    user: () => p.manyToOne(UserSchema),
    role: p.enum([...WORKSPACE_ROLES]).default('contributor'),
  },
  uniques: [{ properties: ['workspace', 'user'] }],
});
export type WorkspaceMember = InferEntity<typeof WorkspaceMemberSchema>;
