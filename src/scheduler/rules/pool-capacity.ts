import type { WorkerPool } from '../../entities/worker-pool.js';
import type { PoolSpecifications } from '../../tags/worker-tags.js';
import { poolHealth, type PoolHealth } from './pool-health.js';

/** The concurrency of a pool's workers (docs/design.md: pools and instances): its specifications', 1 when unset. */
export function poolConcurrency(specifications: PoolSpecifications): number {
  const n = specifications.concurrency;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : 1;
}

/** Why a pool launches fewer instances than it needs. */
export const LAUNCH_LIMITS = {
  MAX_ACTIVE_INSTANCES: 'MAX_ACTIVE_INSTANCES',
  MONTHLY_BUDGET: 'MONTHLY_BUDGET',
  /** Its last launches failed: it waits before trying again (pool-health.ts). */
  BACKOFF: 'BACKOFF',
} as const;
export type LaunchLimit = (typeof LAUNCH_LIMITS)[keyof typeof LAUNCH_LIMITS];

/** How many more instances a pool may start now, and what stops it starting any when it may start none. */
export interface LaunchRoom {
  /** Instances it may still have beside those it has (maxActiveInstances minus its instances). */
  readonly room: number;
  /** Its instances used the month's runtime budget. */
  readonly overBudget: boolean;
  readonly health: PoolHealth;
  /** What it may launch now: its room, or 0 over budget or while it backs off after failed launches. */
  readonly launchable: number;
  /** The limits that hold it at `launchable` = 0, in the order demand names them; empty while it may launch. */
  readonly atLimit: LaunchLimit[];
}

/**
 * The one rule for a pool's room to launch, shared by demand (which then cuts its launches to it) and
 * the diagnosis (which says whether a matching pool could start a worker, or which limit holds it):
 * `instances` are the pool's workers not yet terminated, `runtimeSeconds` its instances' runtime this
 * month (storage/pool-runtime.ts).
 */
export function launchRoom(
  pool: Pick<WorkerPool, 'maxActiveInstances' | 'monthlyRuntimeBudgetSeconds' | 'launchFailures' | 'launchRetryAt' | 'lastErrorKind'>,
  instances: number,
  runtimeSeconds: number,
  now: Date,
  degradedAfterFailures: number,
): LaunchRoom {
  const room = Math.max(0, pool.maxActiveInstances - instances);
  const overBudget = pool.monthlyRuntimeBudgetSeconds != null && runtimeSeconds >= pool.monthlyRuntimeBudgetSeconds;
  const health = poolHealth(pool, now, degradedAfterFailures);
  const launchable = overBudget || health.backingOff ? 0 : room;
  const atLimit: LaunchLimit[] = [];
  if (room === 0) atLimit.push(LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES);
  if (overBudget) atLimit.push(LAUNCH_LIMITS.MONTHLY_BUDGET);
  if (health.backingOff) atLimit.push(LAUNCH_LIMITS.BACKOFF);
  return { room, overBudget, health, launchable, atLimit };
}
