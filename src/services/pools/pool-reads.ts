/** The reads of worker pools that the API and the status pages share: the pools by name, their counts, and the demand as a viewer may read it. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import type { ProvisioningDemand } from '../../scheduler/matching/demand-plan.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import { computeDemand } from '../../scheduler/storage/demand.js';
import type { Viewer } from '../identity/auth.js';
import { principalOf, workRequestSql } from '../identity/visibility.js';

/** The pools by name, `limit` of them at most when given (one statement). */
export function listPools(em: EntityManager, options: { limit?: number } = {}): Promise<WorkerPool[]> {
  return em.find(
    WorkerPoolSchema,
    {},
    options.limit === undefined ? { orderBy: { name: 'asc' } } : { orderBy: { name: 'asc' }, limit: options.limit },
  );
}

/** How many pools there are, and how many of them are enabled (one statement). */
export async function poolCounts(em: EntityManager): Promise<{ n: number; enabled: number }> {
  const [pools] = await em.execute<{ n: number; enabled: number }[]>(
    `select count(*)::int as n, (count(*) filter (where enabled))::int as enabled from worker_pool`,
  );
  return pools;
}

/**
 * The provisioning demand now (scheduler/storage/demand.ts) as the viewer may read it: the
 * unschedulable work it may not see is counted only (services/identity/visibility.ts).
 */
export function demandSeenBy(
  em: EntityManager,
  scheduler: Pick<Scheduler, 'classes' | 'workers'>,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>,
  viewer: Viewer,
): Promise<ProvisioningDemand> {
  const principal = principalOf(viewer);
  return computeDemand(em, scheduler.classes, config, new Date(), scheduler.workers, (alias) =>
    workRequestSql(principal, alias),
  );
}
