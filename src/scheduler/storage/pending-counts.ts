import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Above this many rows in class_pending_count, a reader folds them (compactPendingCounts) after
 * reading: one row is appended per statement that changes some class's pending count, so a busy
 * server adds about one per assignment; the periodic lease sweep folds them too.
 */
const FOLD_ABOVE_ROWS = 5_000;

/**
 * The PENDING work requests per task class (class_id null: pending requests without a class), from
 * the counts PostgreSQL keeps (migration class_pending_count): the sum of each class's rows, exact at
 * the statement's snapshot, in time proportional to the few rows kept rather than to the queue.
 * Classes without pending work are left out; in class id order (demand serves classes in this order).
 * `classified`: leave out the requests without a class.
 */
export async function pendingByClass(
  em: EntityManager,
  options: { classified?: boolean } = {},
): Promise<{ class_id: number; n: number }[]> {
  const rows = await em.execute<{ class_id: number; n: number; rows: number }[]>(
    `select class_id, sum(n)::int as n, count(*)::int as rows from class_pending_count
      ${options.classified ? 'where class_id is not null' : ''} group by class_id order by class_id`,
  );
  if (rows.reduce((sum, r) => sum + r.rows, 0) > FOLD_ABOVE_ROWS) await compactPendingCounts(em);
  return rows.filter((r) => r.n > 0).map((r) => ({ class_id: r.class_id, n: r.n }));
}

/**
 * Folds each class's rows into one (none for a class at zero). Writers append rows concurrently and
 * never touch old ones, so they never wait for it; a concurrent fold waits for this one and then
 * skips the rows it deleted, so a row is never counted twice nor lost.
 */
export async function compactPendingCounts(em: EntityManager): Promise<void> {
  await em.execute(
    `with gone as (delete from class_pending_count returning class_id, n)
     insert into class_pending_count (class_id, n) select class_id, sum(n) from gone group by class_id having sum(n) <> 0`,
  );
}

/**
 * The counts rebuilt from the queue itself: for a bulk load that bypassed the triggers (the bench's
 * loader inserts with session_replication_role = replica, which turns every trigger off).
 */
export const RECOUNT_PENDING_SQL = `
  with gone as (delete from class_pending_count)
  insert into class_pending_count (class_id, n) select class_id, count(*) from work_request where status = 'PENDING' group by class_id`;
