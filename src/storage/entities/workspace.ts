import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { ScopeSchema } from './scope.js';

/** A workspace in a scope; `providableTagPrefixes` are the task-provided tag prefixes its members may set. */
export const WorkspaceSchema = defineEntity({
  name: 'Workspace',
  tableName: 'workspace',
  properties: {
    id: p.integer().primary().autoincrement(),
    scope: () => p.manyToOne(ScopeSchema),
    name: p.string().length(100),
    isPublic: p.boolean().default(true),
    providableTagPrefixes: p.array().columnType('text[]').default([]),
    /** The fair-share clock (scheduler/rules/queue-order.ts): the fair key of its last request written, in ms. */
    fairClock: p.bigint('number').default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
  uniques: [{ properties: ['scope', 'name'] }],
});
export type Workspace = InferEntity<typeof WorkspaceSchema>;
