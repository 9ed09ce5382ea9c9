/**
 * What the server runs itself (docs/design.md: server tasks and workflows). A synchronization point (internal task) completes with
 * SUCCESS as soon as it becomes PENDING, that is when all its dependencies have COMPLETED, whatever
 * their results (as any dependent is released by a completed dependency; an ABORTED dependency
 * aborts it, as it aborts any dependent). A workflow expands into its children when it becomes
 * PENDING (workflow-expansion.ts), is RUNNING while they run, and completes with their combined
 * result (core/tasks/workflow-result.ts) in the transaction that finishes its last child; aborting it
 * aborts the children that have not finished. Everything here runs in the caller's transaction;
 * the caller publishes `workRequestChanged` for what changed after its commit. This module keeps what
 * touches finished workflows and open children; running a request that has just become PENDING is
 * queue-request.ts, settling dependents settle-dependents.ts, resuming at startup resume-orchestration.ts.
 *
 * Lock order, so that an abort and a completion never wait on each other in a cycle: a request is
 * locked before its dependents (settleDependents) and a child before its workflow (the completion
 * of the last child, and the abort of a workflow, which locks the open children first).
 */
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { FINISHED_STATUSES, isFinished } from '../../core/work-request-status.js';
import { intArray } from '../../storage/db/arrays.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import { combineChildResults, type FinishedChild } from '../../core/tasks/workflow-result.js';
import type { RequestChange } from './request-change.js';

/**
 * The RUNNING workflows of these finished requests whose children have now all finished complete with
 * the children's combined result. Each workflow is locked before its children are counted, so that of
 * two children finishing at once the second to commit sees the first.
 */
export async function completeFinishedWorkflows(
  em: EntityManager,
  finishedIds: readonly number[],
): Promise<RequestChange[]> {
  if (!finishedIds.length) return [];
  const rows = await em.execute<{ id: number }[]>(
    `select distinct parent_id as id from work_request where id = any(?::int[]) and parent_id is not null`,
    [intArray(finishedIds)],
  );
  if (!rows.length) return [];
  const workflows = await em.find(
    WorkRequestSchema,
    { id: { $in: rows.map((r) => r.id) }, status: 'RUNNING', taskType: 'workflow' },
    { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' }, refresh: true },
  );
  const changes: RequestChange[] = [];
  for (const workflow of workflows) {
    const children = await em.execute<
      { id: number; task_name: string; status: string; result: FinishedChild['result'] }[]
    >(`select id, task_name, status, result from work_request where parent_id = ? order by id`, [workflow.id]);
    if (children.some((c) => !isFinished(c.status))) continue;
    const combined = combineChildResults(
      children.map((c) => ({
        id: c.id,
        taskName: c.task_name,
        status: c.status as FinishedChild['status'],
        result: c.result,
      })),
    );
    workflow.status = 'COMPLETED';
    workflow.result = combined.result;
    workflow.statusReason = combined.reason;
    workflow.completedAt = new Date();
    changes.push({ id: workflow.id, workspaceId: workflow.workspace.id });
  }
  await em.flush();
  return changes;
}

/**
 * The descendants of a request (a workflow's children, theirs, …) that have not finished, locked in
 * id order: a child's dependencies come before it, and are locked first as a completion locks them.
 */
export async function lockOpenDescendants(em: EntityManager, rootId: number): Promise<WorkRequest[]> {
  const rows = await em.execute<{ id: number }[]>(
    `with recursive d(id) as (
       select id from work_request where parent_id = ?
       union select w.id from work_request w join d on w.parent_id = d.id
     ) select id from d`,
    [rootId],
  );
  if (!rows.length) return [];
  return em.find(
    WorkRequestSchema,
    { id: { $in: rows.map((r) => r.id) }, status: { $nin: [...FINISHED_STATUSES] } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' }, refresh: true },
  );
}

/**
 * Aborts these unfinished requests (a workflow's open children, locked by the caller). One that is
 * ASSIGNED or RUNNING keeps its worker for the record; the worker learns of it as of any abort: its
 * `startWorkRequest` or `completeWorkRequest` is refused, and `workRequestChanged` tells subscribers.
 */
export function abortAll(requests: readonly WorkRequest[], reason: string): RequestChange[] {
  const now = new Date();
  return requests.map((r) => {
    r.status = 'ABORTED';
    r.completedAt = now;
    r.statusReason = reason;
    return { id: r.id, workspaceId: r.workspace.id };
  });
}
