import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, textArray } from '../../storage/db/arrays.js';
import { isActiveSql, isUnacknowledgedSql } from '../rules/active-work.js';

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
 * with the reason (a request back in the queue is PENDING again from now: `pending_at`). Rows another
 * transaction holds are left for the next sweep. Runs in the caller's transaction.
 *
 * `watchingSince` (the periodic sweep passes when its process started) counts silence from then at
 * the earliest: while the servers were down no agent could acknowledge or heartbeat, so a freshly
 * started process gives every worker a full timeout to come back before it takes work away (else a
 * restart slower than the lease would re-queue, and so run twice, everything that is running).
 * `workerId` limits the sweep to one worker's work (a built-in server worker taking back, with zero
 * timeouts, what its previous process held: src/loops/server-tasks/server-workers.ts).
 */
export async function expireLeases(
  em: EntityManager,
  now: Date,
  limits: { ackTimeoutMs: number; heartbeatTimeoutMs: number; maxRetries: number },
  watchingSince: Date | null = null,
  workerId: number | null = null,
): Promise<LeaseChange[]> {
  // max(t, watchingSince) < now - timeout  ⟺  t < now - timeout, when watchingSince < now - timeout; never otherwise.
  const cutoff = (timeoutMs: number) => {
    const before = now.getTime() - timeoutMs;
    return new Date(watchingSince && watchingSince.getTime() >= before ? 0 : before);
  };
  const ackBefore = cutoff(limits.ackTimeoutMs);
  const seenBefore = cutoff(limits.heartbeatTimeoutMs);
  return em.execute<LeaseChange[]>(
    requeueSql(`
       select w.id, w.status, w.retry_count, w.assigned_at, w.quarantine_probe, k.id as worker_id, true as counts,
              case when w.status = 'ASSIGNED'
                   then format('worker %s did not acknowledge the assignment in time', k.name)
                   else format('worker %s stopped heartbeating while running it', k.name) end as why
         from work_request w join worker k on k.id = w.worker_id
        where ((w.status = 'ASSIGNED' and w.assigned_at < ?)
           or (w.status = 'RUNNING' and (k.last_seen_at is null or k.last_seen_at < ?)))
          and (?::int is null or w.worker_id = ?)
        for update of w skip locked`),
    [ackBefore, seenBefore, workerId, workerId, ...requeueParams(now, limits.maxRetries)],
  );
}

/**
 * Takes back everything terminated workers hold (docs/design.md: pools and instances): work they had not started goes back
 * to PENDING at once, untouched (it never ran: no retry counted); running work is re-queued as a
 * retry, or ABORTED past the maximum, by the same rule as an expired lease. Waits for rows another
 * transaction holds (a completion being recorded wins, and its request is then left alone). Runs in
 * the caller's transaction.
 */
export async function requeueWorkOf(
  em: EntityManager,
  workerIds: readonly number[],
  reason: string,
  now: Date,
  limits: { maxRetries: number },
  /** false: running work goes back without counting a retry (its machine was taken away, as a spot interruption does). */
  countRetries = true,
): Promise<LeaseChange[]> {
  if (!workerIds.length) return [];
  return em.execute<LeaseChange[]>(
    requeueSql(`
       select w.id, w.status, w.retry_count, w.assigned_at, w.quarantine_probe, k.id as worker_id, (w.status = 'RUNNING' and ${countRetries ? 'true' : 'false'}) as counts,
              format('worker %s was terminated (%s)', k.name, ?::text) as why
         from work_request w join worker k on k.id = w.worker_id
        where w.worker_id = any(?::int[]) and ${isActiveSql('w')}
        for update of w`),
    [reason, intArray(workerIds), ...requeueParams(now, limits.maxRetries)],
  );
}

/**
 * Takes back the work of workers whose server process is gone (services/processes/registry.ts: its
 * heartbeat expired while it held their connections): what they had not acknowledged (ASSIGNED) goes
 * back to PENDING at once, untouched (it never started: no retry counted); a built-in server worker's
 * RUNNING work too, since its task ran in that process, as a retry or ABORTED past the maximum, by the same
 * rule as an expired lease. An agent's RUNNING work is left to its own heartbeat (it runs on the agent's
 * machine). Waits for rows another transaction holds (an acknowledgement being recorded wins, and its
 * request, RUNNING by then, is left alone). Runs in the caller's transaction.
 */
export async function requeueWorkOfLostProcess(
  em: EntityManager,
  workerIds: readonly number[],
  /** Why, after "worker NAME lost its server process", e.g. the process's name and what became of it. */
  reason: string,
  now: Date,
  limits: { maxRetries: number },
): Promise<LeaseChange[]> {
  if (!workerIds.length) return [];
  return em.execute<LeaseChange[]>(
    requeueSql(`
       select w.id, w.status, w.retry_count, w.assigned_at, w.quarantine_probe, k.id as worker_id, w.status = 'RUNNING' as counts,
              format('worker %s lost its server process (%s)', k.name, ?::text) as why
         from work_request w join worker k on k.id = w.worker_id
        where w.worker_id = any(?::int[])
          and (${isUnacknowledgedSql('w')} or (w.status = 'RUNNING' and k.type = 'server'))
        for update of w`),
    [reason, intArray(workerIds), ...requeueParams(now, limits.maxRetries)],
  );
}

/**
 * The retry rule, one statement for every way work is taken back: `selected` gives the rows (locked)
 * with `id, status, retry_count, assigned_at, quarantine_probe, worker_id`, `why` (the reason kept on
 * the request) and `counts` (whether this counts as a retry). A counted retry past the maximum ABORTS
 * the request with the reason, and so does any quarantine probe (it was for its worker alone:
 * services/work/quarantine-probes.ts); otherwise it goes back to PENDING, its worker and times cleared.
 * Parameters: those of `selected`, then requeueParams.
 */
function requeueSql(selected: string): string {
  return `with expired as (${selected}
     ), decided as (
       select e.*, (e.counts and e.retry_count + 1 > ?) or e.quarantine_probe as give_up, e.retry_count + case when e.counts then 1 else 0 end as retries
         from expired e
     )
     update work_request w
        set status = case when d.give_up then 'ABORTED' else 'PENDING' end,
            retry_count = d.retries,
            worker_id = case when d.give_up then w.worker_id end,
            assigned_at = case when d.give_up then w.assigned_at end,
            started_at = case when d.give_up then w.started_at end,
            estimated_start_at = case when d.give_up then w.estimated_start_at end,
            completed_at = case when d.give_up then ?::timestamptz end,
            pending_at = case when d.give_up then w.pending_at else ?::timestamptz end,
            status_reason = case when d.quarantine_probe then d.why || '; a quarantine probe is never re-queued: aborted'
                                 when d.give_up then d.why || format(' (retry %s of %s): aborted', d.retries, ?::int)
                                 when d.counts then d.why || format('; re-queued (retry %s of %s)', d.retries, ?::int)
                                 when d.status = 'RUNNING' then d.why || '; re-queued, not counted as a retry'
                                 else d.why || '; back to the queue, not started' end
       from decided d
      where w.id = d.id
      returning w.id, w.workspace_id as "workspaceId", w.status, d.worker_id as "workerId", d.assigned_at as "assignedAt"`;
}

/** The parameters requeueSql adds after those of its selection. */
const requeueParams = (now: Date, maxRetries: number) => [maxRetries, now, now, maxRetries, maxRetries];

/**
 * Workers that let a lease expire without a word since they got the work (no heartbeat, no call)
 * are taken as gone and marked disconnected, so that no pass gives them work again. Without this, a
 * worker whose connection was never seen to close (its server process was killed) stays "connected":
 * every pass would give it the re-queued work again, until the retries are used up and the request
 * is ABORTED while healthy workers wait. A worker that is in fact alive comes back with its next
 * heartbeat or connection; one heard from since it got the work is left alone (checked on the row
 * now, under its lock). Runs in the caller's transaction; returns the workers marked, for events.
 */
export async function disconnectSilentWorkers(
  em: EntityManager,
  changes: readonly LeaseChange[],
  now: Date,
  limits: { heartbeatTimeoutMs: number },
): Promise<{ id: number; name: string }[]> {
  if (!changes.length) return [];
  const seenBefore = new Date(now.getTime() - limits.heartbeatTimeoutMs);
  return em.execute<{ id: number; name: string }[]>(
    `update worker k set connected_at = null
       from (select v.id, max(v.assigned_at) as assigned_at from unnest(?::int[], ?::timestamptz[]) as v(id, assigned_at) group by v.id) v
      where k.id = v.id and k.connected_at is not null
        and (k.last_seen_at is null or k.last_seen_at <= v.assigned_at or k.last_seen_at < ?)
      returning k.id, k.name`,
    [
      intArray(changes.map((c) => c.workerId)),
      textArray(changes.map((c) => (c.assignedAt instanceof Date ? c.assignedAt.toISOString() : String(c.assignedAt)))),
      seenBefore,
    ],
  );
}
