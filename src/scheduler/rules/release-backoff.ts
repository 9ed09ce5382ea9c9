import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../db/arrays.js';

/**
 * A request a worker released (its agent has no handler for the task, say) is not offered to that
 * worker again until the backoff ends (DESIGN §17); other workers may take it at once. The rule's one
 * home: the SQL condition for one worker's pull (notBackedOffSql), the pairs for the bulk pass and
 * the diagnosis (backoffsOf), and the record written at release (recordRelease).
 */

/**
 * True when the request under `requestAlias` is not backed off from a worker: two parameters, the
 * worker id and now (notBackedOffParams), in its place.
 */
export const notBackedOffSql = (requestAlias: string) =>
  `not exists (select 1 from release_backoff b where b.work_request_id = ${requestAlias}.id and b.worker_id = ? and b.until > ?)`;

/** The parameters of notBackedOffSql. */
export const notBackedOffParams = (workerId: number, now: Date): unknown[] => [workerId, now];

/** One backoff: the worker the request is not offered to before `until`. */
export interface Backoff {
  readonly workerId: number;
  readonly until: Date;
}

/** From this many requests on, backoffsOf first checks whether any backoff is in force at all. */
const MANY_REQUESTS = 256;

/** The backoffs in force now of these requests, by request id. */
export async function backoffsOf(em: EntityManager, requestIds: readonly number[], now: Date): Promise<Map<number, Backoff[]>> {
  const out = new Map<number, Backoff[]>();
  if (!requestIds.length) return out;
  // A pass asks about every head it read (a hundred thousand at a large farm) while backoffs are rare:
  // a look at the small table first spares sending that list when none is in force.
  if (requestIds.length > MANY_REQUESTS) {
    const [{ any }] = await em.execute<{ any: boolean }[]>(`select exists (select 1 from release_backoff where until > ?) as any`, [now]);
    if (!any) return out;
  }
  const rows = await em.execute<{ work_request_id: number; worker_id: number; until: Date | string }[]>(
    `select work_request_id, worker_id, until from release_backoff where work_request_id = any(?::int[]) and until > ?`,
    [intArray(requestIds), now],
  );
  for (const r of rows) {
    const list = out.get(r.work_request_id) ?? [];
    list.push({ workerId: r.worker_id, until: new Date(r.until) });
    out.set(r.work_request_id, list);
  }
  return out;
}

/**
 * Records that a worker released a request: it is not offered to that worker before now + backoffMs.
 * Backoffs of this request that have ended are removed on the way (the table stays as small as the
 * set of recent releases).
 */
export async function recordRelease(em: EntityManager, requestId: number, workerId: number, now: Date, backoffMs: number): Promise<void> {
  if (backoffMs <= 0) return;
  await em.execute(`delete from release_backoff where work_request_id = ? and until <= ?`, [requestId, now]);
  await em.execute(
    `insert into release_backoff (work_request_id, worker_id, until) values (?, ?, ?)
     on conflict (work_request_id, worker_id) do update set until = excluded.until`,
    [requestId, workerId, new Date(now.getTime() + backoffMs)],
  );
}

/** Removes the backoffs that have ended (the periodic sweep). */
export async function forgetEndedBackoffs(em: EntityManager, now: Date): Promise<void> {
  await em.execute(`delete from release_backoff where until <= ?`, [now]);
}
