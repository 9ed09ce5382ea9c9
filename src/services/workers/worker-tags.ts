import type { EntityManager } from '@mikro-orm/postgresql';
import type { TagsConfig } from '../../core/config/tags.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { Worker } from '../../storage/entities/worker.js';
import { computeWorkerTags } from '../../core/tags/worker-tags.js';
import { poolTagInput } from '../../scheduler/storage/pool-templates.js';
import { registerSignificantTags } from '../../scheduler/storage/classes.js';

/**
 * Recomputes a worker's two tag sets from its type, pool, static and dynamic metadata and stores them
 * on the entity (flushed by the caller). Called on every report and every admin change.
 */
export function refreshWorkerTags(worker: Worker, pool: WorkerPool | null, config: TagsConfig): void {
  const result = computeWorkerTags({
    type: worker.type,
    pool: pool ? poolTagInput(pool) : null,
    staticMetadata: worker.staticMetadata,
    dynamicMetadata: worker.dynamicMetadata,
    sizeThresholds: config.sizeThresholds,
  });
  worker.providedTags = result.providedTags;
  worker.requiredTags = result.requiredTags;
  worker.providedEntries = result.provided;
  worker.requiredEntries = result.required;
  worker.rejectedTags = result.rejected;
}

/** Makes the tags workers or pools require significant for task classes (after they are stored). */
export async function noteRequiredTags(em: EntityManager, requiredTags: readonly string[]): Promise<void> {
  if (requiredTags.length) await em.transactional((tx) => registerSignificantTags(tx, requiredTags));
}
