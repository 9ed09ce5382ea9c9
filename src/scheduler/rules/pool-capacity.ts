import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { PoolSpecifications } from '../../core/tags/worker-tags.js';
import { firstCharge, nextLaunchPrice } from './pool-cost.js';
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
  /** Its committed cost this month reached its monthlyCostBudget, or leaves room for fewer launches than it needs (pool-cost.ts, underCostBudget). */
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
  /** Its committed cost this month (pool-cost.ts: committedCostInMonth) reached its monthly cost budget. */
  readonly overCostBudget: boolean;
  /** Launches its cost budget leaves it ({@link costBudgetRoom}; Infinity without one). */
  readonly budgetRoom: number;
  readonly health: PoolHealth;
  /** Launches its rate limit leaves it this minute (Infinity without one). */
  readonly rate: number;
  /** What it may launch now: its room within its rate limit and its cost budget's room, or 0 over either budget or while it backs off after failed launches. */
  readonly launchable: number;
  /** The limits that hold it at `launchable` = 0, in the order demand names them; empty while it may launch. */
  readonly atLimit: LaunchLimit[];
}

/**
 * Whether a pool may launch under its monthly cost budget: its committed cost this month (the sum of
 * pool-cost.ts's committedCostInMonth over its instances: storage/pool-runtime.ts) is below it; always
 * without one. The provisioner asks it again before each launch, in the transaction that records the
 * launch (services/pools/instances.ts: recordBudgetedLaunch), so one cycle never launches past it.
 */
export function underCostBudget(budget: number | null | undefined, committedCost: number): boolean {
  return budget == null || committedCost < budget;
}

/**
 * How many launches a pool's cost budget leaves it: none once {@link underCostBudget} fails, else as
 * many as it takes for the committed cost to reach the budget when each adds `charge` (pool-cost.ts:
 * firstCharge of its next launch's price), the last of them the one made while still below it.
 * Infinity without a budget or without a price.
 */
export function costBudgetRoom(budget: number | null | undefined, committedCost: number, charge: number): number {
  if (!underCostBudget(budget, committedCost)) return 0;
  if (budget == null || !(charge > 0)) return Infinity;
  return Math.max(1, Math.ceil((budget - committedCost) / charge));
}

/**
 * How many more instances a pool may have (its maxActiveInstances), beside the `instances` it has (its
 * workers not terminated): what the demand plans with (launchRoom) and what the provisioner checks again
 * in the transaction that records each launch (services/pools/instances.ts: recordBudgetedLaunch).
 */
export function instanceRoom(maxActiveInstances: number, instances: number): number {
  return Math.max(0, maxActiveInstances - instances);
}

/**
 * The one rule for a pool's room to launch, shared by demand (which then cuts its launches to it) and
 * the diagnosis (which says whether a matching pool could start a worker, or which limit holds it):
 * `instances` are the pool's workers not yet terminated, `runtimeSeconds` its instances' runtime this
 * month and `committedCost` their committed cost this month (storage/pool-runtime.ts, rules/pool-cost.ts).
 */
export function launchRoom(
  pool: Pick<
    WorkerPool,
    'maxActiveInstances' | 'monthlyRuntimeBudgetSeconds' | 'launchFailures' | 'launchRetryAt' | 'lastErrorKind'
  > &
    Partial<
      Pick<
        WorkerPool,
        'maxLaunchesPerMinute' | 'monthlyCostBudget' | 'pricePerHour' | 'billingPeriodSeconds' | 'specifications'
      >
    >,
  instances: number,
  runtimeSeconds: number,
  now: Date,
  degradedAfterFailures: number,
  /** Its launches in the last minute (storage/pool-launches.ts), for its rate limit. */
  launchesLastMinute = 0,
  committedCost = 0,
): LaunchRoom {
  const room = instanceRoom(pool.maxActiveInstances, instances);
  const rate = rateRoom(pool, launchesLastMinute);
  const overBudget = pool.monthlyRuntimeBudgetSeconds != null && runtimeSeconds >= pool.monthlyRuntimeBudgetSeconds;
  const overCostBudget = !underCostBudget(pool.monthlyCostBudget, committedCost);
  const budgetRoom = costBudgetRoom(
    pool.monthlyCostBudget,
    committedCost,
    firstCharge(nextLaunchPrice(pool), pool.billingPeriodSeconds),
  );
  const health = poolHealth(pool, now, degradedAfterFailures);
  const launchable = overBudget || overCostBudget || health.backingOff ? 0 : Math.min(room, rate, budgetRoom);
  const atLimit: LaunchLimit[] = [];
  if (room === 0) atLimit.push(LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES);
  if (overBudget) atLimit.push(LAUNCH_LIMITS.MONTHLY_BUDGET);
  if (overCostBudget) atLimit.push(LAUNCH_LIMITS.COST_BUDGET);
  if (health.backingOff) atLimit.push(LAUNCH_LIMITS.BACKOFF);
  if (rate === 0) atLimit.push(LAUNCH_LIMITS.RATE_LIMIT);
  return { room, overBudget, overCostBudget, budgetRoom, health, rate, launchable, atLimit };
}
