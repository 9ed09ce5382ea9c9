import type { EntityManager } from '@mikro-orm/postgresql';
import type { TagsConfig } from '../../core/config/tags.js';
import { WorkerPoolSchema } from '../../storage/entities/worker-pool.js';
import { WORKER_TASK_CATALOG } from '../../core/tasks/registry.js';
import { computePoolTemplateTags, type PoolTagInput } from '../../core/tags/worker-tags.js';
import type { PoolTemplate } from '../matching/pool-template.js';

/** What of a pool its image tags come from: the image its specifications name, and that image's tags as copied onto the pool. */
interface PoolRow extends Omit<PoolTagInput, 'taskCatalog' | 'image'> {
  readonly imageTags?: readonly string[] | null;
}

/** What of a stored pool its workers' tags and its template follow from (one home for every caller). */
export function poolTagInput(pool: PoolRow): PoolTagInput {
  const name = pool.specifications.image;
  const image = typeof name === 'string' && pool.imageTags ? { name, tags: pool.imageTags } : null;
  return {
    name: pool.name,
    providedTags: pool.providedTags,
    requiredTags: pool.requiredTags,
    specifications: pool.specifications,
    image,
    taskCatalog: WORKER_TASK_CATALOG,
  };
}

/** The enabled pools in demand order (by name: documented in the README), with their template tags. */
export async function loadPoolTemplates(
  em: EntityManager,
  config: TagsConfig,
  includeDisabled = false,
): Promise<PoolTemplate[]> {
  const pools = await em.find(WorkerPoolSchema, includeDisabled ? {} : { enabled: true }, { orderBy: { name: 'asc' } });
  return pools.map((pool) => {
    const t = computePoolTemplateTags(poolTagInput(pool), config.sizeThresholds);
    return { pool, type: 'worker', providedTags: t.providedTags, requiredTags: t.requiredTags };
  });
}
