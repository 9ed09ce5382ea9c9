import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, textArray } from '../db/arrays.js';

/** What one sweep changed, for events and for settling dependents. */
export interface LeaseChange {
  readonly id: number;
  readonly workspaceId: number;
  readonly status: 'PENDING' | 'ABORTED';
  /** The worker that held it, and since when (for disconnectSilentWorkers). */
  readonly workerId: number;
  readonly assignedAt: Date | string;
}

/**
 * Takes work back from workers that will not finish it: an assignment not acknowledged within the
 * ack timeout, and a RUNNING request whose worker has not been heard from within the heartbeat
 * timeout. Each goes back to PENDING with its retry count raised, or, past the maximum, is ABORTED
 * with the reason. Rows another transaction holds are left for the next sweep. Runs in the caller's transaction.
 *
 * `watchingSince` (the periodic sweep passes when its process started) counts silence from then at
 * the earliest: while the servers were down no agent could acknowledge or heartbeat, so a freshly
 * started process gives every worker a full timeout to come back before it takes work away (else a
 * restart slower than the lease would re-queue, and so run twice, everything that is running).
 */
export async function expireLeases(
  em: EntityManager,
  now: Date,
  limits: { ackTimeoutMs: number; heartbeatTimeoutMs: number; maxRetries: number },
  watchingSince: Date | null = null,
): Promise<LeaseChange[]> {
  // max(t, watchingSince) < now - timeout  ⟺  t < now - timeout, when watchingSince < now - timeout; never otherwise.
  const cutoff = (timeoutMs: number) => {
    const before = now.getTime() - timeoutMs;
    return new Date(watchingSince && watchingSince.getTime() >= before ? 0 : before);
  };
  const ackBefore = cutoff(limits.ackTimeoutMs);
  const seenBefore = cutoff(limits.heartbeatTimeoutMs);
  return em.execute<LeaseChange[]>(
    `with expired as (
       select w.id, w.status, w.retry_count, w.assigned_at, k.id as worker_id, k.name as worker_name
         from work_request w join worker k on k.id = w.worker_id
        where (w.status = 'ASSIGNED' and w.assigned_at < ?)
           or (w.status = 'RUNNING' and (k.last_seen_at is null or k.last_seen_at < ?))
        for update of w skip locked
     ), decided as (
       select e.*, e.retry_count + 1 > ? as give_up,
              case when e.status = 'ASSIGNED'
                   then format('worker %s did not acknowledge the assignment in time', e.worker_name)
                   else format('worker %s stopped heartbeating while running it', e.worker_name) end as why
         from expired e
     )
     update work_request w
        set status = case when d.give_up then 'ABORTED' else 'PENDING' end,
            retry_count = d.retry_count + 1,
            worker_id = case when d.give_up then w.worker_id end,
            assigned_at = case when d.give_up then w.assigned_at end,
            started_at = case when d.give_up then w.started_at end,
            completed_at = case when d.give_up then ?::timestamptz end,
            status_reason = case when d.give_up then d.why || format(' (retry %s of %s): aborted', d.retry_count + 1, ?::int)
                                 else d.why || format('; re-queued (retry %s of %s)', d.retry_count + 1, ?::int) end
       from decided d
      where w.id = d.id
      returning w.id, w.workspace_id as "workspaceId", w.status, d.worker_id as "workerId", d.assigned_at as "assignedAt"`,
    [ackBefore, seenBefore, limits.maxRetries, now, limits.maxRetries, limits.maxRetries],
  );
}

/**
 * Workers that let a lease expire without a word since they got the work (no heartbeat, no call)
 * are taken as gone and marked disconnected, so that no pass gives them work again. Without this, a
 * worker whose connection was never seen to close (its server process was killed) stays "connected":
 * every pass would give it the re-queued work again, until the retries are used up and the request
 * is ABORTED while healthy workers wait. A worker that is in fact alive comes back with its next
 * heartbeat or connection; one heard from since it got the work is left alone (checked on the row
 * now, under its lock). Runs in the caller's transaction; returns the workers marked, for events.
 */
export async function disconnectSilentWorkers(em: EntityManager, changes: readonly LeaseChange[], now: Date, limits: { heartbeatTimeoutMs: number }): Promise<{ id: number; name: string }[]> {
  if (!changes.length) return [];
  const seenBefore = new Date(now.getTime() - limits.heartbeatTimeoutMs);
  return em.execute<{ id: number; name: string }[]>(
    `update worker k set connected_at = null
       from (select v.id, max(v.assigned_at) as assigned_at from unnest(?::int[], ?::timestamptz[]) as v(id, assigned_at) group by v.id) v
      where k.id = v.id and k.connected_at is not null
        and (k.last_seen_at is null or k.last_seen_at <= v.assigned_at or k.last_seen_at < ?)
      returning k.id, k.name`,
    [intArray(changes.map((c) => c.workerId)), textArray(changes.map((c) => (c.assignedAt instanceof Date ? c.assignedAt.toISOString() : String(c.assignedAt)))), seenBefore],
  );
}
