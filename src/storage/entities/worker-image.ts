import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { Manifest } from '../../core/manifest-format.js';

/**
 * A worker image registered with the service (docs/design.md: images): the manifest `tagsched-image build`
 * wrote, checked when registered and never changed afterwards (a new build is a new name), so that
 * the pools naming it keep the tags they were given.
 */
export const WorkerImageSchema = defineEntity({
  name: 'WorkerImage',
  tableName: 'worker_image',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(100).unique(),
    manifest: p.json<Manifest>(),
    registeredAt: p.datetime().onCreate(() => new Date()),
  },
});
export type WorkerImage = InferEntity<typeof WorkerImageSchema>;
