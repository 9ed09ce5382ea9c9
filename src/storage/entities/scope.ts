import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/** A scope: the top-level namespace of workspaces and groups (e.g. `debian`). */
export const ScopeSchema = defineEntity({
  name: 'Scope',
  tableName: 'scope',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(100).unique(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type Scope = InferEntity<typeof ScopeSchema>;
