import type { EntityManager } from '@mikro-orm/postgresql';

/** What one sweep changed, for events and for settling dependents. */
export interface LeaseChange {
  readonly id: number;
  readonly workspaceId: number;
  readonly status: 'PENDING' | 'ABORTED';
}

/**
 * Takes work back from workers that will not finish it: an assignment not acknowledged within the
 * ack timeout, and a RUNNING request whose worker has not been heard from within the heartbeat
 * timeout. Each goes back to PENDING with its retry count raised, or, past the maximum, is ABORTED
 * with the reason. Rows another transaction holds are left for the next sweep. Runs in the caller's transaction.
 */
export async function expireLeases(em: EntityManager, now: Date, limits: { ackTimeoutMs: number; heartbeatTimeoutMs: number; maxRetries: number }): Promise<LeaseChange[]> {
  const ackBefore = new Date(now.getTime() - limits.ackTimeoutMs);
  const seenBefore = new Date(now.getTime() - limits.heartbeatTimeoutMs);
  return em.execute<LeaseChange[]>(
    `with expired as (
       select w.id, w.status, w.retry_count, k.name as worker_name
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
      returning w.id, w.workspace_id as "workspaceId", w.status`,
    [ackBefore, seenBefore, limits.maxRetries, now, limits.maxRetries, limits.maxRetries],
  );
}
