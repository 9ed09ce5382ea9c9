import type { EntityManager } from '@mikro-orm/postgresql';
import { committedCostInMonthSql, costInMonthSql } from '../rules/pool-cost.js';

const MONTH_START = `(date_trunc('month', now() at time zone 'UTC') at time zone 'UTC')`;
const END = `least(coalesce(i.terminated_at, now()), now())`;

/** The month's runtime, cost and committed cost of the instances `where` selects (alias `i`, its pool `p`), by pool. */
const monthSql = (where: string) => `
  select i.pool_id,
         coalesce(sum(extract(epoch from ${END} - greatest(i.requested_at, ${MONTH_START}))), 0)::float as seconds,
         coalesce(sum(${costInMonthSql('i', 'p', END, MONTH_START)}), 0)::float as cost,
         coalesce(sum(${committedCostInMonthSql('i', 'p', END, MONTH_START)}), 0)::float as committed
    from instance i
    join worker_pool p on p.id = i.pool_id
   where coalesce(i.terminated_at, now()) > ${MONTH_START}${where}
   group by i.pool_id`;

/**
 * The runtime of each pool's instances in the current calendar month (UTC), in seconds: the sum,
 * over its instances, of the part of [requested, terminated or now] that falls in this month. It is
 * what `monthlyRuntimeBudgetSeconds` limits (docs/design.md: pools and instances). Beside it, the
 * same instances' cost in this month (rules/pool-cost.ts: costInMonth), and their committed cost
 * (rules/pool-cost.ts: committedCostInMonth: a live instance counts at least its first charge), what
 * `monthlyCostBudget` limits (rules/pool-capacity.ts: underCostBudget). Workers with no instance
 * record (made by hand with a pool-wide activation token) count for nothing.
 */
export const MONTH_RUNTIME_SQL = monthSql('');

/** Each pool's month in use, by pool id. */
export interface MonthUse {
  readonly runtime: Map<number, number>;
  readonly cost: Map<number, number>;
  /** What its cost budget is checked against (rules/pool-cost.ts: committedCostInMonth, summed). */
  readonly committed: Map<number, number>;
}

/** The month's runtime, cost and committed cost of every pool that ran anything this month, by pool id, in one statement. */
export async function monthUseByPool(em: EntityManager): Promise<MonthUse> {
  const rows =
    await em.execute<{ pool_id: number; seconds: number; cost: number; committed: number }[]>(MONTH_RUNTIME_SQL);
  return {
    runtime: new Map(rows.map((r) => [r.pool_id, Math.max(0, r.seconds)])),
    cost: new Map(rows.map((r) => [r.pool_id, Math.max(0, r.cost)])),
    committed: new Map(rows.map((r) => [r.pool_id, Math.max(0, r.committed)])),
  };
}

/**
 * One pool's committed cost this month, read by `em` (inside the transaction that records a launch:
 * services/pools/instances.ts, after it locked the pool's row, so it counts every launch recorded before).
 */
export async function committedCostOf(em: EntityManager, poolId: number): Promise<number> {
  const [row] = await em.execute<{ committed: number }[]>(monthSql(' and i.pool_id = ?'), [poolId]);
  return Math.max(0, row?.committed ?? 0);
}

/** The month's runtime of every pool that ran anything this month, by pool id. */
export async function monthRuntimeByPool(em: EntityManager): Promise<Map<number, number>> {
  return (await monthUseByPool(em)).runtime;
}
