import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { activeByWorkerSql } from '../rules/active-work.js';

/**
 * How many requests each of these workers holds (ASSIGNED or RUNNING: rules/active-work.ts), by worker
 * id, in one statement (the partial index work_request_active_worker); a worker that holds none is absent.
 */
export async function activeWorkCounts(em: EntityManager, workerIds: readonly number[]): Promise<Map<number, number>> {
  if (!workerIds.length) return new Map();
  const rows = await em.execute<{ worker_id: number; n: number }[]>(
    `select worker_id, active as n from ${activeByWorkerSql('a.worker_id = any(?::int[])')} x`,
    [intArray(workerIds)],
  );
  return new Map(rows.map((r) => [r.worker_id, r.n]));
}
