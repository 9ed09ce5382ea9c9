import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AnalysisConfig } from './task-analysis.js';
import { WorkRequestSchema } from '../../storage/entities/work-request.js';
import { UNASSIGNABLE_TASK_TYPES } from '../../core/tasks/types.js';
import { runOrchestrated } from './queue-request.js';
import type { RequestChange } from './request-change.js';
import { settleDependents } from './settle-dependents.js';

/**
 * Internal and workflow requests left PENDING (by a version of tagsched that did not run them, or
 * written by hand) are run now; a concurrent caller (another process starting) skips the rows this
 * one holds. Returns what changed, for the caller to publish.
 */
export async function resumeOrchestration(em: EntityManager, config: AnalysisConfig): Promise<RequestChange[]> {
  return em.transactional(async (tx) => {
    const stuck = await tx.find(
      WorkRequestSchema,
      { status: 'PENDING', taskType: { $in: [...UNASSIGNABLE_TASK_TYPES] } },
      { lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE, orderBy: { id: 'asc' }, populate: ['workspace', 'createdBy'] },
    );
    const changed: RequestChange[] = [];
    const finished: number[] = [];
    for (const wr of stuck) {
      const outcome = await runOrchestrated(tx, config, wr);
      changed.push({ id: wr.id, workspaceId: wr.workspace.id }, ...outcome.changed);
      finished.push(...outcome.finished);
    }
    await tx.flush();
    return [...changed, ...(await settleDependents(tx, config, finished))];
  });
}
