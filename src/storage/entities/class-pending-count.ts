import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * Pending work requests per task class, as changes: the sum of a class's rows is its number of
 * PENDING requests (class_id null: pending requests without a class). PostgreSQL appends one row
 * per class and statement that changes it (triggers `class_pending_count_*`, migration
 * class_pending_count), so concurrent writers never wait on each other; compactPendingCounts
 * (scheduler/storage/pending-counts.ts) folds the rows. Never written by the application otherwise.
 */
export const ClassPendingCountSchema = defineEntity({
  name: 'ClassPendingCount',
  tableName: 'class_pending_count',
  properties: {
    id: p.bigint().primary().autoincrement(),
    classId: p.integer().nullable(),
    n: p.integer(),
  },
});
export type ClassPendingCount = InferEntity<typeof ClassPendingCountSchema>;
