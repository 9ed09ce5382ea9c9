import type { EntityManager } from '@mikro-orm/postgresql';
import type { TagsConfig } from '../../core/config/tags.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { Worker } from '../../storage/entities/worker.js';
import { computeWorkerTags } from '../../core/tags/worker-tags.js';
import { poolTagInput } from '../../scheduler/storage/pool-templates.js';
import { registerSignificantTags } from '../../scheduler/storage/classes.js';
import { NO_RESOURCES, offeredResources } from '../../scheduler/rules/resources.js';

/**
 * Recomputes a worker's two tag sets from its type, pool, static and dynamic metadata and stores them
 * on the entity (flushed by the caller), with what it offers when it shares its resources. Called on every
 * report and every admin change.
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
  refreshOfferedResources(worker, pool);
}

/**
 * What a worker offers while it shares its resources (scheduler/rules/resources.ts: offeredResources), 0
 * while it does not. A pool worker shares them when its pool's specifications say so; a static worker
 * when its admin said so (registerWorker, setWorkerStaticMetadata).
 */
function refreshOfferedResources(worker: Worker, pool: WorkerPool | null): void {
  if (pool) worker.offersResources = pool.specifications.offersResources === true;
  const offered = worker.offersResources
    ? offeredResources(worker.staticMetadata, worker.dynamicMetadata, pool?.specifications ?? null)
    : NO_RESOURCES;
  worker.offeredCpus = offered.cpus;
  worker.offeredMemoryMib = offered.memoryMib;
  worker.offeredDiskMib = offered.diskMib;
}

/** Makes the tags workers or pools require significant for task classes (after they are stored). */
export async function noteRequiredTags(em: EntityManager, requiredTags: readonly string[]): Promise<void> {
  if (requiredTags.length) await em.transactional((tx) => registerSignificantTags(tx, requiredTags));
}
