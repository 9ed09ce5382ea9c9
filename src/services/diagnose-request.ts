import type { Loaders } from '../loaders.js';
import { diagnose, type Diagnosis } from '../scheduler/matching/diagnosis.js';
import { isOrchestrated } from '../tasks/types.js';

/** What a diagnosis reads of a work request. */
export interface DiagnosedRequest {
  readonly id: number;
  readonly status: string;
  readonly taskType: string;
  readonly taskName: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/**
 * The whole diagnosis of one work request, as the API and the status pages show it: the match against
 * every worker and pool, its release backoffs, and for a PENDING request its placement (which free
 * worker first, and why) and its place in the queue. Everything it reads goes through the
 * operation's loaders, so a list of requests costs a bounded number of statements.
 */
export async function diagnoseRequest(loaders: Loaders, wr: DiagnosedRequest): Promise<Diagnosis> {
  const task = { id: wr.id, status: wr.status, taskType: wr.taskType, taskName: wr.taskName, providedTags: wr.providedTags, requiredTags: wr.requiredTags };
  if (isOrchestrated(wr.taskType)) return diagnose(task, [], []); // no worker or pool is read for it
  const pending = wr.status === 'PENDING';
  const [workers, pools, backoffs, placement, queue] = await Promise.all([
    loaders.workerStates(),
    loaders.poolTemplates(),
    loaders.releaseBackoffs.load(wr.id),
    pending ? loaders.placementContext() : null,
    pending ? loaders.queuePositions.load(wr.id) : null,
  ]);
  return { ...diagnose(task, workers, pools, backoffs, placement ?? undefined), queue };
}
