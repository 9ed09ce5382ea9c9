/**
 * What workers that share their resources have free and whom they are held for, for the API and the
 * pages (services and api/ read it through here): free resources by the rule's SQL form
 * (rules/resources.ts: freeResourcesSql), and each worker's reservation while its request is PENDING and
 * it has not lapsed.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, toDate } from '../../storage/db/arrays.js';
import { RESOURCE_COLUMNS, freeResourcesSql, type Resources } from '../rules/resources.js';

/** A worker's reservation in force: the pending request it is held for, since when, and when that request is expected to fit. */
export interface HeldFor {
  readonly workRequestId: number;
  readonly reservedAt: Date;
  readonly startsAt: Date;
}

/** What a worker that shares its resources offers and has free now, and its reservation in force (null: none). */
export interface WorkerResourceState {
  readonly offered: Resources;
  readonly free: Resources;
  readonly heldFor: HeldFor | null;
}

/**
 * The state of each worker of `ids` that shares its resources, by id (workers with slots are left out);
 * with `ids` null, of every such worker not terminated.
 */
export async function workerResourceStates(
  em: EntityManager,
  ids: readonly number[] | null,
): Promise<Map<number, WorkerResourceState>> {
  if (ids && !ids.length) return new Map();
  const f = RESOURCE_COLUMNS.free;
  const o = RESOURCE_COLUMNS.worker;
  const rows = await em.execute<Record<string, unknown>[]>(
    `select w.id, w.${o.cpus}, w.${o.memoryMib}, w.${o.diskMib}, f.${f.cpus}, f.${f.memoryMib}, f.${f.diskMib},
            r.work_request_id, r.reserved_at, r.starts_at
       from worker w
       cross join lateral ${freeResourcesSql('w')} f
       -- By the worker's key, one lookup a worker: a join on the small table's stale statistics (it grows within
       -- minutes as passes reserve) made PostgreSQL compare every worker with every reservation.
       left join lateral (
         select r.work_request_id, r.reserved_at, r.starts_at from worker_reservation r
          where r.worker_id = w.id and r.lapsed_at is null
            and exists (select 1 from work_request q where q.id = r.work_request_id and q.status = 'PENDING')
       ) r on true
      where ${ids ? 'w.id = any(?::int[])' : 'w.terminated_at is null'} and w.offers_resources`,
    ids ? [intArray(ids)] : [],
  );
  return new Map(
    rows.map((r) => [
      Number(r.id),
      {
        offered: { cpus: Number(r[o.cpus]), memoryMib: Number(r[o.memoryMib]), diskMib: Number(r[o.diskMib]) },
        free: { cpus: Number(r[f.cpus]), memoryMib: Number(r[f.memoryMib]), diskMib: Number(r[f.diskMib]) },
        heldFor:
          r.work_request_id == null
            ? null
            : {
                workRequestId: Number(r.work_request_id),
                reservedAt: toDate(r.reserved_at as Date | string)!,
                startsAt: toDate(r.starts_at as Date | string)!,
              },
      },
    ]),
  );
}

/** What each worker of `ids` that shares its resources has free now, by id (workers with slots are left out): demand's read. */
export async function freeResourcesOf(em: EntityManager, ids: readonly number[]): Promise<Map<number, Resources>> {
  if (!ids.length) return new Map();
  const f = RESOURCE_COLUMNS.free;
  const rows = await em.execute<Record<string, number>[]>(
    `select w.id, f.${f.cpus}, f.${f.memoryMib}, f.${f.diskMib}
       from worker w cross join lateral ${freeResourcesSql('w')} f
      where w.id = any(?::int[]) and w.offers_resources`,
    [intArray(ids)],
  );
  return new Map(
    rows.map((r) => [
      Number(r.id),
      { cpus: Number(r[f.cpus]), memoryMib: Number(r[f.memoryMib]), diskMib: Number(r[f.diskMib]) },
    ]),
  );
}

/** The workers of `ids` that share their resources (one short read: the flag alone). */
export async function sharingWorkers(em: EntityManager, ids: readonly number[]): Promise<Set<number>> {
  if (!ids.length) return new Set();
  const rows = await em.execute<{ id: number }[]>(
    'select id from worker where id = any(?::int[]) and offers_resources',
    [intArray(ids)],
  );
  return new Set(rows.map((r) => Number(r.id)));
}
