import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AnalysisConfig } from './task-analysis.js';
import { WorkRequestSchema } from '../../storage/entities/work-request.js';
import { completeFinishedWorkflows } from './orchestration.js';
import { queueWorkRequest } from './queue-request.js';
import type { RequestChange } from './request-change.js';

/**
 * After requests finished: dependents whose dependencies are now all COMPLETED become PENDING (and
 * what the server runs itself runs: orchestration.ts), dependents of an ABORTED request are aborted
 * too (they could never run), and workflows whose children have all finished complete. What finishes
 * on the way is settled in turn. Returns the requests it changed, for the caller to publish.
 */
export async function settleDependents(
  em: EntityManager,
  config: AnalysisConfig,
  finishedIds: number[],
): Promise<RequestChange[]> {
  const changed: RequestChange[] = [];
  let frontier = finishedIds;
  while (frontier.length) {
    const next: number[] = [];
    const rows = await em.execute<{ id: number }[]>(
      `select distinct d.work_request_id as id from work_request_dependency d
         join work_request w on w.id = d.work_request_id
        where d.depends_on_id in (${frontier.map(() => '?').join(',')}) and w.status = 'BLOCKED'`,
      frontier,
    );
    // Still BLOCKED once locked: a concurrent settler that got there first has queued it (and, for a
    // workflow, expanded it) already, and it must not be queued twice.
    const dependents = rows.length
      ? await em.find(
          WorkRequestSchema,
          { id: { $in: rows.map((r) => r.id) }, status: 'BLOCKED' },
          { populate: ['dependencies', 'workspace', 'createdBy'], lockMode: LockMode.PESSIMISTIC_WRITE },
        )
      : [];
    for (const wr of dependents) {
      const deps = wr.dependencies.getItems();
      const abortedDep = deps.find((d) => d.status === 'ABORTED');
      if (abortedDep) {
        wr.status = 'ABORTED';
        wr.completedAt = new Date();
        wr.statusReason = `dependency ${abortedDep.id} was aborted`;
        next.push(wr.id);
        changed.push({ id: wr.id, workspaceId: wr.workspace.id });
      } else if (deps.every((d) => d.status === 'COMPLETED')) {
        const outcome = await queueWorkRequest(em, config, wr);
        changed.push({ id: wr.id, workspaceId: wr.workspace.id }, ...outcome.changed);
        next.push(...outcome.finished);
      }
    }
    await em.flush();
    const workflows = await completeFinishedWorkflows(em, frontier);
    changed.push(...workflows);
    next.push(...workflows.map((w) => w.id));
    frontier = next;
  }
  return [...new Map(changed.map((c) => [c.id, c])).values()];
}
