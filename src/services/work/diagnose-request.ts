import type DataLoader from 'dataloader';
import { isOrchestrated } from '../../tasks/types.js';
import type { Backoff } from '../../scheduler/rules/release-backoff.js';
import type { Diagnosis } from '../../scheduler/matching/diagnosis.js';
import type { PlacementContext, PoolContext } from '../../scheduler/matching/diagnosis.js';
import type { PoolTemplate } from '../../scheduler/matching/pool-template.js';
import type { QueuePosition } from '../../scheduler/rules/queue-order.js';
import type { WorkerState } from '../../scheduler/matching/worker-state.js';
import { diagnose } from '../../scheduler/matching/diagnosis.js';

/** What a diagnosis reads of a work request. */
export interface DiagnosedRequest {
  readonly id: number;
  readonly status: string;
  readonly taskType: string;
  readonly taskName: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/** What a diagnosis reads through the operation's loaders (the interface layer's `Loaders` has all of these). */
export interface DiagnosisReads {
  workerStates(): Promise<WorkerState[]>;
  poolTemplates(): Promise<PoolTemplate[]>;
  readonly releaseBackoffs: Pick<DataLoader<number, Backoff[]>, 'load'>;
  readonly queuePositions: Pick<DataLoader<number, QueuePosition | null>, 'load'>;
  placementContext(): Promise<PlacementContext | null>;
  poolContext(): Promise<PoolContext>;
}

/**
 * The whole diagnosis of one work request, as the API and the status pages show it: the match against
 * every worker and pool, its release backoffs, and for a PENDING request its placement (which free
 * worker first, and why), its place in the queue and the matching pools' room to launch. Everything it reads goes through the
 * operation's loaders, so a list of requests costs a bounded number of statements.
 */
export async function diagnoseRequest(loaders: DiagnosisReads, wr: DiagnosedRequest): Promise<Diagnosis> {
  const task = { id: wr.id, status: wr.status, taskType: wr.taskType, taskName: wr.taskName, providedTags: wr.providedTags, requiredTags: wr.requiredTags };
  if (isOrchestrated(wr.taskType)) return diagnose(task, [], []); // no worker or pool is read for it
  const pending = wr.status === 'PENDING';
  const [workers, pools, backoffs, placement, queue, poolContext] = await Promise.all([
    loaders.workerStates(),
    loaders.poolTemplates(),
    loaders.releaseBackoffs.load(wr.id),
    pending ? loaders.placementContext() : null,
    pending ? loaders.queuePositions.load(wr.id) : null,
    pending ? loaders.poolContext() : undefined,
  ]);
  return { ...diagnose(task, workers, pools, backoffs, placement ?? undefined, poolContext), queue };
}
