import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { WorkerPoolSchema, type WorkerPool } from '../entities/worker-pool.js';
import { computePoolTemplateTags } from '../tags/worker-tags.js';

/** A pool as the matcher sees it: what any worker it starts would provide and require. */
export interface PoolTemplate {
  readonly pool: WorkerPool;
  readonly type: 'worker';
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/** The enabled pools in demand order (by name: documented in the README), with their template tags. */
export async function loadPoolTemplates(em: EntityManager, config: Config, includeDisabled = false): Promise<PoolTemplate[]> {
  const pools = await em.find(WorkerPoolSchema, includeDisabled ? {} : { enabled: true }, { orderBy: { name: 'asc' } });
  return pools.map((pool) => {
    const t = computePoolTemplateTags(
      { name: pool.name, providedTags: pool.providedTags, requiredTags: pool.requiredTags, specifications: pool.specifications },
      config.sizeThresholds,
    );
    return { pool, type: 'worker', providedTags: t.providedTags, requiredTags: t.requiredTags };
  });
}
