import type { WorkerPool } from '../../entities/worker-pool.js';
import type { PoolSpecifications } from '../../tags/worker-tags.js';
import { poolHealth, type PoolHealth } from './pool-health.js';
import { rateRoom } from './scale-in.js';

/** The concurrency of a pool's workers (docs/design.md: pools and instances): its specifications', 1 when unset. */
export function poolConcurrency(specifications: PoolSpecifications): number {
  const n = specifications.concurrency;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : 1;
}

/** Why a pool launches fewer instances than it needs. */
export const LAUNCH_LIMITS = {
  MAX_ACTIVE_INSTANCES: 'MAX_ACTIVE_INSTANCES',
  MONTHLY_BUDGET: 'MONTHLY_BUDGET',
  /** Its instances' cost this month reached its monthlyCostBudget (cost.ts). */
  COST_BUDGET: 'COST_BUDGET',
  /** Its last launches failed: it waits before trying again (pool-health.ts). */
  BACKOFF: 'BACKOFF',
  /** It launched its maxLaunchesPerMinute in the last minute (scale-in.ts: rateRoom). */
  RATE_LIMIT: 'RATE_LIMIT',
} as const;
export type LaunchLimit = (typeof LAUNCH_LIMITS)[keyof typeof LAUNCH_LIMITS];

/** How many more instances a pool may start now, and what stops it starting any when it may start none. */
export interface LaunchRoom {
  /** Instances it may still have beside those it has (maxActiveInstances minus its instances). */
  readonly room: number;
  /** Its instances used the month's runtime budget. */
  readonly overBudget: boolean;
  /** Its instances' cost this month reached its monthly cost budget. */
  readonly overCostBudget: boolean;
  readonly health: PoolHealth;
  /** Launches its rate limit leaves it this minute (Infinity without one). */
  readonly rate: number;
  /** What it may launch now: its room within its rate limit, or 0 over either budget or while it backs off after failed launches. */
  readonly launchable: number;
  /** The limits that hold it at `launchable` = 0, in the order demand names them; empty while it may launch. */
  readonly atLimit: LaunchLimit[];
}

/**
 * The one rule for a pool's room to launch, shared by demand (which then cuts its launches to it) and
 * the diagnosis (which says whether a matching pool could start a worker, or which limit holds it):
 * `instances` are the pool's workers not yet terminated, `runtimeSeconds` its instances' runtime this
 * month and `monthCost` their cost this month (storage/pool-runtime.ts, rules/cost.ts).
 */
export function launchRoom(
  pool: Pick<WorkerPool, 'maxActiveInstances' | 'monthlyRuntimeBudgetSeconds' | 'launchFailures' | 'launchRetryAt' | 'lastErrorKind'> &
    Partial<Pick<WorkerPool, 'maxLaunchesPerMinute' | 'monthlyCostBudget'>>,
  instances: number,
  runtimeSeconds: number,
  now: Date,
  degradedAfterFailures: number,
  /** Its launches in the last minute (storage/pool-launches.ts), for its rate limit. */
  launchesLastMinute = 0,
  monthCost = 0,
): LaunchRoom {
  const room = Math.max(0, pool.maxActiveInstances - instances);
  const rate = rateRoom(pool, launchesLastMinute);
  const overBudget = pool.monthlyRuntimeBudgetSeconds != null && runtimeSeconds >= pool.monthlyRuntimeBudgetSeconds;
  const overCostBudget = pool.monthlyCostBudget != null && monthCost >= pool.monthlyCostBudget;
  const health = poolHealth(pool, now, degradedAfterFailures);
  const launchable = overBudget || overCostBudget || health.backingOff ? 0 : Math.min(room, rate);
  const atLimit: LaunchLimit[] = [];
  if (room === 0) atLimit.push(LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES);
  if (overBudget) atLimit.push(LAUNCH_LIMITS.MONTHLY_BUDGET);
  if (overCostBudget) atLimit.push(LAUNCH_LIMITS.COST_BUDGET);
  if (health.backingOff) atLimit.push(LAUNCH_LIMITS.BACKOFF);
  if (rate === 0) atLimit.push(LAUNCH_LIMITS.RATE_LIMIT);
  return { room, overBudget, overCostBudget, health, rate, launchable, atLimit };
}
