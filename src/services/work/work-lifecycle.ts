import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkRequestSchema, type WorkRequest, type WorkRequestResult } from '../../storage/entities/work-request.js';
import { ForbiddenError, InvalidStateError, NotFoundError, UnauthenticatedError } from '../../core/errors.js';
import { textArray } from '../../storage/db/arrays.js';
import { isOrchestrated, UNASSIGNABLE_TASK_TYPES } from '../../core/tasks/types.js';
import { isActive } from '../../core/work-request-status.js';
import { isAdmin, requireWorker } from '../identity/auth.js';
import { compactLog, lastOutputLines } from './job-output.js';
import { checkRunStatistics, keepRunStatistics } from './run-statistics.js';
import type { RunStatistics } from '../../shared/run-statistics.js';
import { cleanReason } from '../../shared/log-text.js';
import { VALID_TOKEN_SQL } from '../identity/tokens.js';
import { settleDependents } from '../workflows/settle-dependents.js';
import type { WorkRequestDeps } from './work-requests.js';
import { START_SQL } from '../../scheduler/storage/work-transitions.js';
import { isActiveSql, isUnacknowledgedSql } from '../../scheduler/rules/active-work.js';
import { judgeWorker } from '../../scheduler/storage/quarantine.js';
import { recordRelease } from '../../scheduler/storage/release-backoffs.js';
import { seenByCall } from '../workers/presence.js';

/** Pull: the calling worker gets its next work request (assigned atomically), or null. */
export async function requestWork(deps: WorkRequestDeps): Promise<WorkRequest | null> {
  const worker = requireWorker(deps.viewer);
  // A worker that asks is alive: the call counts as a heartbeat, recorded in the pull's transaction,
  // in the same round trip as the worker's lock.
  const assignment = await deps.scheduler.requestWork(worker.id, {
    seen: seenByCall(new Date(), deps.serverStopping?.() ?? false),
  });
  if (!assignment) return null;
  // The scheduler published the assignment (workAssigned, and workRequestChanged as ASSIGNED). The
  // answer is the row as the assignment left it; its workspace and creator are read by the loaders if asked for.
  return deps.em.map(WorkRequestSchema, assignment.row);
}

/**
 * A pushed assignment read again before it is sent: the request while it is still ASSIGNED to the
 * worker (a lease may have taken it back), and in the same statement whether the connection's token
 * may still be used (VALID_TOKEN_SQL; true for a connection without a token).
 */
export async function stillAssigned(
  em: EntityManager,
  id: number,
  workerId: number,
  tokenId: number | null,
): Promise<{ workRequest: WorkRequest | null; tokenValid: boolean }> {
  const [row] = await em.execute<Record<string, unknown>[]>(
    `select r.*, ${tokenId === null ? 'true' : `exists (select 1 from token t where t.id = ? and ${VALID_TOKEN_SQL})`} as token_valid_
       from work_request r where r.id = ? and r.worker_id = ? and ${isUnacknowledgedSql('r')}`,
    tokenId === null ? [id, workerId] : [tokenId, id, workerId],
  );
  if (!row) return { workRequest: null, tokenValid: true };
  const { token_valid_: tokenValid, ...columns } = row;
  return { workRequest: em.map(WorkRequestSchema, columns), tokenValid: tokenValid === true };
}

async function lockAssigned(deps: WorkRequestDeps, rawId: string, tx: WorkRequestDeps['em']): Promise<WorkRequest> {
  const id = Number(rawId);
  const wr = Number.isSafeInteger(id)
    ? await tx.findOne(WorkRequestSchema, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE })
    : null;
  const viewer = deps.viewer;
  // To a worker, another worker's request does not exist.
  if (!wr || (viewer.kind === 'worker' && wr.worker?.id !== viewer.worker.id))
    throw new NotFoundError(`id: no work request ${rawId} assigned to you`, 'id');
  return wr;
}

/** The assignee acknowledges its assignment and starts it: ASSIGNED → RUNNING. */
export async function startWorkRequest(deps: WorkRequestDeps, rawId: string): Promise<WorkRequest> {
  const me = requireWorker(deps.viewer);
  const id = Number(rawId);
  if (Number.isSafeInteger(id)) {
    // The usual case in one statement (its row lock is the update's): the worker's own ASSIGNED
    // request becomes RUNNING. Anything else (a repeated acknowledgement, a request taken back) is
    // answered by the locked read below.
    const [row] = await deps.em.execute<Record<string, unknown>[]>(START_SQL, [new Date(), id, me.id]);
    if (row) {
      const started = deps.em.map(WorkRequestSchema, row);
      deps.events.publish('workRequestChanged', {
        id: started.id,
        workspaceId: started.workspace.id,
        status: 'RUNNING',
      });
      return started;
    }
  }
  const wr = await deps.em.transactional(async (tx) => {
    const locked = await lockAssigned(deps, rawId, tx);
    if (locked.status === 'RUNNING') return locked; // a repeated acknowledgement is harmless
    if (locked.status !== 'ASSIGNED')
      throw new InvalidStateError(`work request ${rawId} is ${locked.status}, not ASSIGNED`);
    // Under the lock it is this worker's ASSIGNED request (lockAssigned): the same statement starts it.
    const [row] = await tx.execute<Record<string, unknown>[]>(START_SQL, [new Date(), locked.id, me.id]);
    return tx.map(WorkRequestSchema, row);
  });
  deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: wr.workspace.id, status: 'RUNNING' });
  return wr;
}

/** How the handler ended, as its agent tells it with the result. */
export interface RunOutcome {
  /** The handler's exit code; null or absent when it did not exit by itself. */
  exitCode?: number | null;
  /** Why it failed, in the agent's (or the admin's) words; without one, a FAILURE or ERROR takes the last lines of its output. */
  statusReason?: string | null;
  /** What the run used, as its agent measured it (kept by a worker's report only). */
  statistics?: RunStatistics | null;
}

/**
 * The reason a FAILURE or ERROR is recorded with: the one given, else the last lines the run wrote,
 * else what is known of its end.
 */
async function failureReason(em: EntityManager, wr: WorkRequest, outcome: RunOutcome): Promise<string> {
  const given = outcome.statusReason != null ? cleanReason(outcome.statusReason) : null;
  if (given) return given;
  const lines = await lastOutputLines(em, wr.id);
  if (lines) return lines;
  return outcome.exitCode != null ? `exit code ${outcome.exitCode}, and no output` : 'no reason given, and no output';
}

/**
 * Records the result of a request: its assignee (or an admin) completes it; dependents whose
 * dependencies are now all complete become PENDING, and a pass is triggered for the freed slot.
 * A FAILURE or ERROR always gets a statusReason (failureReason); the log is compacted.
 */
export async function completeWorkRequest(
  deps: WorkRequestDeps,
  rawId: string,
  result: WorkRequestResult,
  outcome: RunOutcome = {},
): Promise<WorkRequest> {
  const viewer = deps.viewer;
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  if (viewer.kind !== 'worker' && !isAdmin(viewer))
    throw new ForbiddenError('only the assigned worker or an admin may complete a work request');
  const statistics = viewer.kind === 'worker' ? (outcome.statistics ?? null) : null;
  if (statistics) checkRunStatistics(statistics);
  const id = Number(rawId);
  if (viewer.kind === 'worker' && result === 'SUCCESS' && Number.isSafeInteger(id)) {
    const done = await completeQuietSuccess(deps.em, id, viewer.worker.id, outcome.exitCode ?? null, new Date());
    if (done) {
      // Kept after the completion's commit: figures lost to a crash between the two come again with the agent's retry.
      if (statistics) await keepRunStatistics(deps.em, done, statistics);
      deps.metrics?.completed(done, statistics);
      const refilled = await refill(deps, viewer.worker.id);
      deps.events.publish('workRequestChanged', {
        id: done.id,
        workspaceId: done.workspace.id,
        status: 'COMPLETED',
        ...(refilled ? { slotRefilled: true } : {}),
      });
      if (!refilled) deps.scheduler.trigger('work-finished');
      return done;
    }
  }
  const { wr, changed, repeated, quarantine } = await deps.em.transactional(async (tx) => {
    const locked = await lockAssigned(deps, rawId, tx);
    // The same report again, from the worker that made it: the answer to the first was lost (a cut
    // connection, a killed server) and the agent retried. It was recorded: say so, change nothing.
    if (locked.status === 'COMPLETED' && locked.result === result && viewer.kind === 'worker') {
      if (statistics) await keepRunStatistics(tx, locked, statistics);
      return { wr: locked, changed: [], repeated: true, quarantine: null };
    }
    if (!isActive(locked.status)) {
      throw new InvalidStateError(
        `work request ${rawId} is ${locked.status}: only ASSIGNED or RUNNING work can be completed`,
      );
    }
    if (isOrchestrated(locked.taskType))
      throw new InvalidStateError(
        `work request ${rawId} is a ${locked.taskType} task, which the server completes (a workflow when its children have finished)`,
      );
    const now = new Date();
    locked.status = 'COMPLETED';
    locked.result = result;
    locked.startedAt ??= now;
    locked.completedAt = now;
    locked.exitCode = outcome.exitCode ?? null;
    if (result === 'FAILURE' || result === 'ERROR') locked.statusReason = await failureReason(tx, locked, outcome);
    await tx.flush();
    await recordCompletion(tx, locked, now);
    if (statistics) await keepRunStatistics(tx, locked, statistics);
    const quarantine = locked.worker
      ? await judgeWorker(tx, locked.worker.id, result, now, deps.config.workers.quarantineAfterErrors)
      : null;
    await compactLog(tx, locked.id);
    return { wr: locked, changed: await settleDependents(tx, deps.config, [locked.id]), repeated: false, quarantine };
  });
  if (repeated) return wr;
  if (quarantine) deps.events.publish('workerChanged', quarantine);
  deps.metrics?.completed(wr, statistics);
  const refilled = viewer.kind === 'worker' && (await refill(deps, viewer.worker.id));
  deps.events.publish('workRequestChanged', {
    id: wr.id,
    workspaceId: wr.workspace.id,
    status: 'COMPLETED',
    ...(refilled ? { slotRefilled: true } : {}),
  });
  for (const change of changed) deps.events.publish('workRequestChanged', change);
  if (!refilled) deps.scheduler.trigger('work-finished');
  return wr;
}

/**
 * The worker that just freed a slot gets its next work at once, as its own pull would (one row
 * locked, the assignment pushed to its subscription), instead of a full pass over every worker: the
 * only slot the completion freed is its own, and what the completion released (dependents) is
 * published as pending work of its own. Only when the scheduler runs by itself; false when the pull
 * failed (a pass then does it).
 */
async function refill(deps: WorkRequestDeps, workerId: number): Promise<boolean> {
  if (!deps.config.scheduler.automatic) return false;
  try {
    await deps.scheduler.requestWork(workerId);
    return true;
  } catch {
    return false;
  }
}

/**
 * The usual completion in one statement: a worker reports SUCCESS for its own ASSIGNED or RUNNING
 * request, and nothing else has to happen in the same transaction: no BLOCKED request depends on it,
 * it is no workflow's child, its log has at most one chunk (nothing to compact), it is not a task the
 * server orchestrates, and its worker is not quarantined (a SUCCESS would lift that: judgeWorker).
 * The row, the worker's last completion and the task's daily duration are written together, as the
 * transaction below writes them. Null when any condition fails: the caller then takes the full path,
 * which also answers repeated reports and refusals.
 */
async function completeQuietSuccess(
  em: EntityManager,
  id: number,
  workerId: number,
  exitCode: number | null,
  now: Date,
): Promise<WorkRequest | null> {
  const [row] = await em.execute<Record<string, unknown>[]>(
    `with done as (
       update work_request r
          set status = 'COMPLETED', result = 'SUCCESS', started_at = coalesce(r.started_at, ?), completed_at = ?, exit_code = ?
        where r.id = ? and r.worker_id = ? and ${isActiveSql('r')} and r.parent_id is null
          and r.task_type <> all(?::text[])
          and not exists (select 1 from work_request_dependency d join work_request b on b.id = d.work_request_id
                           where d.depends_on_id = r.id and b.status = 'BLOCKED')
          and not exists (select 1 from work_request_log_chunk c where c.work_request_id = r.id offset 1)
          and not exists (select 1 from worker q where q.id = r.worker_id and q.quarantined_at is not null)
       returning r.*
     ),
     ${completionTotalsSql('done')}
     select * from done`,
    [now, now, exitCode, id, workerId, textArray(UNASSIGNABLE_TASK_TYPES), ...completionTotalsParams(now)],
  );
  return row ? em.map(WorkRequestSchema, row) : null;
}

/**
 * What the scheduler keeps from a completion instead of reading history, as two CTEs over `source` (the
 * completed row: worker_id, task_type, task_name, started_at): the worker's last completion (its idle
 * time) and the run's duration in its task's total for the day (demand's estimates, heavy work). Both
 * ways of completing write them with this; its parameters are completionTotalsParams.
 */
const completionTotalsSql = (source: string) => `
  totals_worker as (
    update worker set last_completed_at = greatest(coalesce(last_completed_at, ?), ?) where id = (select worker_id from ${source})
  ),
  totals_task as (
    insert into task_duration (task_type, task_name, day, runs, seconds)
    select task_type, task_name, (?::timestamptz at time zone 'UTC')::date, 1, greatest(0, extract(epoch from (?::timestamptz - started_at)))::float8 from ${source}
    on conflict (task_type, task_name, day) do update set runs = task_duration.runs + 1, seconds = task_duration.seconds + excluded.seconds
  )`;
const completionTotalsParams = (now: Date): Date[] => [now, now, now, now];

/** The totals of a completion just flushed in this transaction (completionTotalsSql), in one statement. */
async function recordCompletion(em: EntityManager, wr: WorkRequest, now: Date): Promise<void> {
  await em.execute(
    `with done as (select worker_id, task_type, task_name, started_at from work_request where id = ?),
     ${completionTotalsSql('done')}
     select 1`,
    [wr.id, ...completionTotalsParams(now)],
  );
}

/**
 * The assignee gives a request back to the queue untouched (e.g. it has no handler for that task): no
 * retry is counted, and it is not offered to this worker again for the release backoff. A quarantine
 * probe is ABORTED instead.
 */
export async function releaseWorkRequest(deps: WorkRequestDeps, rawId: string, reason: string): Promise<WorkRequest> {
  const me = requireWorker(deps.viewer);
  const wr = await deps.em.transactional(async (tx) => {
    const locked = await lockAssigned(deps, rawId, tx);
    if (!isActive(locked.status)) {
      throw new InvalidStateError(
        `work request ${rawId} is ${locked.status}: only ASSIGNED or RUNNING work can be released`,
      );
    }
    if (locked.quarantineProbe) {
      // A probe is for this worker alone (quarantine-probes.ts): back in the queue, another would run it.
      locked.status = 'ABORTED';
      locked.completedAt = new Date();
      locked.statusReason = `released by worker ${me.name}: ${reason.slice(0, 500)}; a quarantine probe is never re-queued: aborted`;
      await tx.flush();
      return locked;
    }
    locked.status = 'PENDING';
    locked.pendingAt = new Date();
    locked.worker = null;
    locked.assignedAt = null;
    locked.startedAt = null;
    locked.estimatedStartAt = null; // pending afresh: its next diagnosis estimates it again
    locked.statusReason = `released by worker ${me.name}: ${reason.slice(0, 500)}`;
    await tx.flush();
    await recordRelease(tx, locked.id, me.id, locked.pendingAt, deps.config.scheduler.releaseBackoffMs);
    return locked;
  });
  deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: wr.workspace.id, status: wr.status });
  deps.scheduler.trigger('work-finished');
  return wr;
}
