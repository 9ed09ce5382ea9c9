import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { inForceSql, type Backoff } from '../rules/release-backoff.js';

/** From this many requests on, backoffsOf first checks whether any backoff is in force at all. */
const MANY_REQUESTS = 256;

/** The backoffs in force now (rules/release-backoff.ts) of these requests, by request id. */
export async function backoffsOf(
  em: EntityManager,
  requestIds: readonly number[],
  now: Date,
): Promise<Map<number, Backoff[]>> {
  const out = new Map<number, Backoff[]>();
  if (!requestIds.length) return out;
  // A pass asks about every head it read (a hundred thousand at a large farm) while backoffs are rare:
  // a look at the small table first spares sending that list when none is in force.
  if (requestIds.length > MANY_REQUESTS) {
    const [{ any }] = await em.execute<{ any: boolean }[]>(
      `select exists (select 1 from release_backoff b where ${inForceSql('b')}) as any`,
      [now],
    );
    if (!any) return out;
  }
  const rows = await em.execute<{ work_request_id: number; worker_id: number; until: Date | string }[]>(
    `select b.work_request_id, b.worker_id, b.until from release_backoff b where b.work_request_id = any(?::int[]) and ${inForceSql('b')}`,
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
export async function recordRelease(
  em: EntityManager,
  requestId: number,
  workerId: number,
  now: Date,
  backoffMs: number,
): Promise<void> {
  if (backoffMs <= 0) return;
  await em.execute(`delete from release_backoff b where b.work_request_id = ? and not ${inForceSql('b')}`, [
    requestId,
    now,
  ]);
  await em.execute(
    `insert into release_backoff (work_request_id, worker_id, until) values (?, ?, ?)
     on conflict (work_request_id, worker_id) do update set until = excluded.until`,
    [requestId, workerId, new Date(now.getTime() + backoffMs)],
  );
}

/** Removes the backoffs that have ended (the periodic sweep). */
export async function forgetEndedBackoffs(em: EntityManager, now: Date): Promise<void> {
  await em.execute(`delete from release_backoff b where not ${inForceSql('b')}`, [now]);
}
