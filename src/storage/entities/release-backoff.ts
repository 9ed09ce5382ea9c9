import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * A request a worker released (it has no handler for it, say) is not offered to that worker again
 * before `until` (scheduler/rules/release-backoff.ts). Read and written in SQL by the scheduler.
 */
export const ReleaseBackoffSchema = defineEntity({
  name: 'ReleaseBackoff',
  tableName: 'release_backoff',
  properties: {
    workRequestId: p.integer().primary(),
    workerId: p.integer().primary(),
    until: p.datetime(),
  },
});
export type ReleaseBackoff = InferEntity<typeof ReleaseBackoffSchema>;
