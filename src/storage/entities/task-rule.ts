import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { PartialResources } from '../../core/tasks/resource-request.js';
import { WorkspaceSchema } from './workspace.js';

/** A task configuration rule: for matching work requests, add tags; without a workspace it is a site rule. */
export const TaskRuleSchema = defineEntity({
  name: 'TaskRule',
  tableName: 'task_rule',
  properties: {
    id: p.integer().primary().autoincrement(),
    workspace: () => p.manyToOne(WorkspaceSchema).nullable(),
    name: p.string().length(100),
    taskName: p.string().length(100).nullable(),
    expression: p.text().nullable(),
    providedTags: p.array().columnType('text[]').default([]),
    requiredTags: p.array().columnType('text[]').default([]),
    /** What a matching request reserves (core/tasks/resource-request.ts), figure by figure; null for nothing. */
    resources: p.json<PartialResources>().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
  uniques: [{ properties: ['workspace', 'name'] }],
  indexes: [
    // A NULL workspace never collides in the plain unique above, so site rules need their own.
    {
      name: 'task_rule_site_name_unique',
      expression: `create unique index "task_rule_site_name_unique" on "task_rule" ("name") where "workspace_id" is null`,
    },
  ],
});
export type TaskRule = InferEntity<typeof TaskRuleSchema>;
