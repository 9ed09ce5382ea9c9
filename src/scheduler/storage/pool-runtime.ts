import type { EntityManager } from '@mikro-orm/postgresql';
import { costInMonthSql } from '../rules/cost.js';

const MONTH_START = `(date_trunc('month', now() at time zone 'UTC') at time zone 'UTC')`;
const END = `least(coalesce(i.terminated_at, now()), now())`;

/**
 * The runtime of each pool's instances in the current calendar month (UTC), in seconds: the sum,
 * over its instances, of the part of [requested, terminated or now] that falls in this month. It is
 * what `monthlyRuntimeBudgetSeconds` limits (docs/design.md: pools and instances). Beside it, the
 * same instances' cost in this month (rules/cost.ts: costInMonth), what `monthlyCostBudget` limits.
 * Workers with no instance record (made by hand with a pool-wide activation token) count for nothing.
 */
export const MONTH_RUNTIME_SQL = `
  select i.pool_id,
         coalesce(sum(extract(epoch from ${END} - greatest(i.requested_at, ${MONTH_START}))), 0)::float as seconds,
         coalesce(sum(${costInMonthSql('i', 'p', END, MONTH_START)}), 0)::float as cost
    from instance i
    join worker_pool p on p.id = i.pool_id
   where coalesce(i.terminated_at, now()) > ${MONTH_START}
   group by i.pool_id`;

/** The month's runtime and cost of every pool that ran anything this month, by pool id, in one statement. */
export async function monthUseByPool(em: EntityManager): Promise<{ runtime: Map<number, number>; cost: Map<number, number> }> {
  const rows = await em.execute<{ pool_id: number; seconds: number; cost: number }[]>(MONTH_RUNTIME_SQL);
  return {
    runtime: new Map(rows.map((r) => [r.pool_id, Math.max(0, r.seconds)])),
    cost: new Map(rows.map((r) => [r.pool_id, Math.max(0, r.cost)])),
  };
}

/** The month's runtime of every pool that ran anything this month, by pool id. */
export async function monthRuntimeByPool(em: EntityManager): Promise<Map<number, number>> {
  return (await monthUseByPool(em)).runtime;
}
