/**
 * Where the marks of unavailable offerings live (providers/offerings.ts says what they
 * mean): the table `pool_offering_unavailable`, one row per pool and offering key, so that every
 * server process sees them (whichever runs the next provisioner cycle) and a restart keeps them.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { OfferingMark } from '../../providers/offerings.js';

/** The marks of these pools that still hold at `now`, by pool id. */
export async function readOfferingMarks(
  em: EntityManager,
  poolIds: readonly number[],
  now: Date,
): Promise<Map<number, OfferingMark[]>> {
  const out = new Map<number, OfferingMark[]>();
  if (!poolIds.length) return out;
  const rows = await em.execute<{ pool_id: number; offering_key: string; until: Date | string; reason: string }[]>(
    `select pool_id, offering_key, until, reason from pool_offering_unavailable where pool_id in (${poolIds.map(() => '?').join(', ')}) and until > ? order by pool_id, offering_key`,
    [...poolIds, now],
  );
  for (const r of rows) {
    const list = out.get(r.pool_id) ?? [];
    list.push({ key: r.offering_key, until: new Date(r.until), reason: r.reason });
    out.set(r.pool_id, list);
  }
  return out;
}

/** Records marks of a pool (a later mark of the same offering replaces the earlier one), and forgets the pool's marks that expired. */
export async function recordOfferingMarks(
  em: EntityManager,
  poolId: number,
  marks: readonly OfferingMark[],
  now: Date,
): Promise<void> {
  if (!marks.length) return;
  await em.execute(`delete from pool_offering_unavailable where pool_id = ? and until <= ?`, [poolId, now]);
  for (const m of marks) {
    await em.execute(
      `insert into pool_offering_unavailable (pool_id, offering_key, until, reason) values (?, ?, ?, ?)
       on conflict (pool_id, offering_key) do update set until = excluded.until, reason = excluded.reason`,
      [poolId, m.key, m.until, m.reason.slice(0, 1000)],
    );
  }
}
