import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * A class of pending work requests that every worker decides the same way: the same required tags,
 * and the same provided tags among the significant ones (those some worker or pool requires). Per-package
 * tags are not significant, so they do not split classes. Classes are immutable once created.
 */
export const TaskClassSchema = defineEntity({
  name: 'TaskClass',
  tableName: 'task_class',
  properties: {
    id: p.integer().primary().autoincrement(),
    /** Canonical key: the two sorted tag lists, joined. Up to 100 tags of 255 characters: too long for a btree index. */
    key: p.text(),
    /** SHA-256 of the key, in hex: what makes a class unique (scheduler/storage/classes.ts). */
    keyHash: p.string().length(64).unique(),
    requiredTags: p.array().columnType('text[]').default([]),
    significantProvidedTags: p.array().columnType('text[]').default([]),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type TaskClass = InferEntity<typeof TaskClassSchema>;
