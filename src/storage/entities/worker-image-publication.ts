import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { WorkerImageSchema } from './worker-image.js';

/**
 * Where a registered worker image is bootable (`tagsched-image publish`): the provider's id of the
 * image in one provider and region (a Hetzner snapshot id, an EC2 AMI id). One per image, provider
 * and region; publishing again replaces it.
 */
export const WorkerImagePublicationSchema = defineEntity({
  name: 'WorkerImagePublication',
  tableName: 'worker_image_publication',
  uniques: [
    { properties: ['image', 'provider', 'region'], name: 'worker_image_publication_image_provider_region_unique' },
  ],
  properties: {
    id: p.integer().primary().autoincrement(),
    image: () => p.manyToOne(WorkerImageSchema).deleteRule('cascade'),
    provider: p.string().length(20),
    region: p.string().length(50),
    providerImageId: p.string().length(100),
    publishedAt: p.datetime(),
  },
});
export type WorkerImagePublication = InferEntity<typeof WorkerImagePublicationSchema>;
