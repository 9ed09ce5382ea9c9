import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config.js';
import { WorkerPoolSchema, type WorkerPool } from '../../entities/worker-pool.js';
import { WORKER_TASK_CATALOG } from '../../tasks/registry.js';
import { computePoolTemplateTags, type PoolSpecifications, type PoolTagInput } from '../../tags/worker-tags.js';

/** A pool as the matcher sees it: what any worker it starts would provide and require. */
export interface PoolTemplate {
  readonly pool: WorkerPool;
  readonly type: 'worker';
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/** What of a pool its image tags come from: the image its specifications name, and that image's tags as copied onto the pool. */
interface PoolRow extends Omit<PoolTagInput, 'taskCatalog' | 'image'> {
  readonly imageTags?: readonly string[] | null;
}

/** What of a stored pool its workers' tags and its template follow from (one home for every caller). */
export function poolTagInput(pool: PoolRow): PoolTagInput {
  const name = pool.specifications.image;
  const image = typeof name === 'string' && pool.imageTags ? { name, tags: pool.imageTags } : null;
  return { name: pool.name, providedTags: pool.providedTags, requiredTags: pool.requiredTags, specifications: pool.specifications, image, taskCatalog: WORKER_TASK_CATALOG };
}

/** The concurrency of a pool's workers (DESIGN §11): its specifications', 1 when unset. */
export function poolConcurrency(specifications: PoolSpecifications): number {
  const n = specifications.concurrency;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : 1;
}

/** The enabled pools in demand order (by name: documented in the README), with their template tags. */
export async function loadPoolTemplates(em: EntityManager, config: Config, includeDisabled = false): Promise<PoolTemplate[]> {
  const pools = await em.find(WorkerPoolSchema, includeDisabled ? {} : { enabled: true }, { orderBy: { name: 'asc' } });
  return pools.map((pool) => {
    const t = computePoolTemplateTags(poolTagInput(pool), config.sizeThresholds);
    return { pool, type: 'worker', providedTags: t.providedTags, requiredTags: t.requiredTags };
  });
}
