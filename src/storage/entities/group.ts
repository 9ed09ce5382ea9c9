import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { ScopeSchema } from './scope.js';
import { UserSchema } from './user.js';
import { WorkspaceSchema } from './workspace.js';

/** A group of users in a scope, optionally tied to a workspace; membership becomes `task:group:*` tags. */
export const GroupSchema = defineEntity({
  name: 'Group',
  tableName: 'user_group',
  properties: {
    id: p.integer().primary().autoincrement(),
    scope: () => p.manyToOne(ScopeSchema),
    workspace: () => p.manyToOne(WorkspaceSchema).nullable(),
    name: p.string().length(100),
    members: () => p.manyToMany(UserSchema).pivotTable('user_group_member').owner(),
  },
  uniques: [{ properties: ['scope', 'workspace', 'name'] }],
  indexes: [
    // A NULL workspace never collides in the plain unique above, so scope-wide groups need their own.
    {
      name: 'user_group_scope_name_unique',
      expression: `create unique index "user_group_scope_name_unique" on "user_group" ("scope_id", "name") where "workspace_id" is null`,
    },
  ],
});
export type Group = InferEntity<typeof GroupSchema>;
