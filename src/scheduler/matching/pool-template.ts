import type { WorkerPool } from '../../storage/entities/worker-pool.js';

/** A pool as the matcher sees it: what any worker it starts would provide and require (storage/pool-templates.ts loads them). */
export interface PoolTemplate {
  readonly pool: WorkerPool;
  readonly type: 'worker';
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}
