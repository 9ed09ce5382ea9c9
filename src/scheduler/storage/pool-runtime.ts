import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * The runtime of each pool's instances in the current calendar month (UTC), in seconds: the sum,
 * over its instances, of the part of [requested, terminated or now] that falls in this month. It is
 * what `monthlyRuntimeBudgetSeconds` limits (docs/design.md: pools and instances). Workers with no instance record (made by
 * hand with a pool-wide activation token) count for nothing.
 */
export const MONTH_RUNTIME_SQL = `
  select pool_id,
         coalesce(sum(extract(epoch from least(coalesce(terminated_at, now()), now())
                                      - greatest(requested_at, date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'))), 0)::float as seconds
    from instance
   where coalesce(terminated_at, now()) > date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'
   group by pool_id`;

/** The month's runtime of every pool that ran anything this month, by pool id. */
export async function monthRuntimeByPool(em: EntityManager): Promise<Map<number, number>> {
  const rows = await em.execute<{ pool_id: number; seconds: number }[]>(MONTH_RUNTIME_SQL);
  return new Map(rows.map((r) => [r.pool_id, Math.max(0, r.seconds)]));
}
