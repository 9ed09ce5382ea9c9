import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Each pool's launches as its rate limit and scale-down delay read them (rules/scale-in.ts): how many
 * instances it asked for in the last minute, and when its last one. One statement on the index of a
 * pool's instances by request time; only the pools that launched in the last day are returned (the
 * longest scale-down delay a pool may have).
 */
export async function poolLaunches(
  em: EntityManager,
): Promise<Map<number, { lastMinute: number; lastAt: Date | null }>> {
  const rows = await em.execute<{ pool_id: number; last_minute: number; last_at: Date | string | null }[]>(
    `select pool_id, count(*) filter (where requested_at > now() - interval '1 minute')::int as last_minute, max(requested_at) as last_at
       from instance where requested_at > now() - interval '1 day' group by pool_id`,
  );
  return new Map(
    rows.map((r) => [
      r.pool_id,
      { lastMinute: r.last_minute, lastAt: r.last_at === null ? null : new Date(r.last_at) },
    ]),
  );
}
