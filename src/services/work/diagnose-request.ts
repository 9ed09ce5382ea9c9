import type DataLoader from 'dataloader';
import { isOrchestrated } from '../../core/tasks/types.js';
import type { Backoff } from '../../scheduler/rules/release-backoff.js';
import type { Diagnosis } from '../../scheduler/matching/diagnosis.js';
import type { PlacementContext, PoolContext } from '../../scheduler/matching/diagnosis.js';
import type { PoolTemplate } from '../../scheduler/matching/pool-template.js';
import type { QueuePosition } from '../../scheduler/rules/queue-order.js';
import type { WorkerState } from '../../scheduler/matching/worker-state.js';
import { diagnose } from '../../scheduler/matching/diagnosis.js';
import type { WorkerResourceState } from '../../scheduler/storage/worker-resources.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { StartEstimate } from '../../scheduler/matching/start-estimate.js';
import { classHeads } from '../../scheduler/storage/start-estimate.js';
import { NO_HISTORY } from '../../scheduler/rules/heavy-work.js';
import { estimateStart, type FirstEstimateKeeper, type StartEstimateReads } from './start-estimate.js';

/** What a diagnosis reads of a work request. */
export interface DiagnosedRequest {
  readonly id: number;
  readonly status: string;
  readonly taskType: string;
  readonly taskName: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  /** Its task class while it is PENDING (its estimate errors are its class's). */
  readonly classId?: number | null;
  /** Its first start estimate, once kept. */
  readonly estimatedStartAt?: Date | null;
  /** What it reserves of a worker that shares its resources (0 each when absent). */
  readonly reservedCpus?: number;
  readonly reservedMemoryMib?: number;
  readonly reservedDiskMib?: number;
}

/** What a diagnosis reads through the operation's loaders (the interface layer's `Loaders` has all of these). */
export interface DiagnosisReads extends StartEstimateReads {
  workerStates(): Promise<WorkerState[]>;
  hostStates(): Promise<ReadonlyMap<number, WorkerResourceState>>;
  poolTemplates(): Promise<PoolTemplate[]>;
  readonly releaseBackoffs: Pick<DataLoader<number, Backoff[]>, 'load'>;
  readonly queuePositions: Pick<DataLoader<number, QueuePosition | null>, 'load'>;
  placementContext(): Promise<PlacementContext | null>;
  poolContext(): Promise<PoolContext>;
}

/** How many classes {@link estimateClassHeads} estimates at most (the caller picks them, e.g. those with the most pending). */
export const ESTIMATED_CLASSES = 50;

/**
 * The start estimate of the head of each class's queue (its next request to start), by class id: the
 * queue page and /metrics show it as the class's wait. At most {@link ESTIMATED_CLASSES} classes, in a
 * bounded number of statements (the heads in one, then the diagnoses' batched reads); these
 * estimates are not kept on the requests (only a request's own diagnosis keeps its first).
 */
export async function estimateClassHeads(
  em: EntityManager,
  loaders: DiagnosisReads,
  classIds: readonly number[],
): Promise<Map<number, StartEstimate>> {
  const heads = await classHeads(em, classIds.slice(0, ESTIMATED_CLASSES));
  const diagnoses = await Promise.all(heads.map((h) => diagnoseRequest(loaders, h)));
  const out = new Map<number, StartEstimate>();
  heads.forEach((h, i) => {
    const e = diagnoses[i].startEstimate;
    if (e) out.set(h.classId, e);
  });
  return out;
}

/**
 * The whole diagnosis of one work request, as the API and the status pages show it: the match against
 * every worker and pool, its release backoffs, and for a PENDING request its placement (which free
 * worker first, and why), its place in the queue, the matching pools' room to launch and when it is
 * expected to start (start-estimate.ts), its first estimate kept through `keep` when given (the
 * operation's firstEstimateKeeper). Everything it reads goes through the operation's loaders, so a
 * list of requests costs a bounded number of statements.
 */
export async function diagnoseRequest(
  loaders: DiagnosisReads,
  wr: DiagnosedRequest,
  options: { keep?: FirstEstimateKeeper } = {},
): Promise<Diagnosis> {
  const task = {
    id: wr.id,
    status: wr.status,
    taskType: wr.taskType,
    taskName: wr.taskName,
    providedTags: wr.providedTags,
    requiredTags: wr.requiredTags,
  };
  if (isOrchestrated(wr.taskType)) return diagnose(task, [], []); // no worker or pool is read for it
  const pending = wr.status === 'PENDING';
  const [workers, hosts, pools, backoffs, placement, queue, poolContext] = await Promise.all([
    loaders.workerStates(),
    loaders.hostStates(),
    loaders.poolTemplates(),
    loaders.releaseBackoffs.load(wr.id),
    pending ? loaders.placementContext() : null,
    pending ? loaders.queuePositions.load(wr.id) : null,
    pending ? loaders.poolContext() : undefined,
  ]);
  const resources = {
    request: {
      cpus: wr.reservedCpus ?? 0,
      memoryMib: wr.reservedMemoryMib ?? 0,
      diskMib: wr.reservedDiskMib ?? 0,
    },
    hosts,
  };
  const diagnosis = {
    ...diagnose(task, workers, pools, backoffs, placement ?? undefined, poolContext, resources),
    queue,
  };
  if (!pending || !poolContext) return diagnosis;
  const startEstimate = await estimateStart(
    loaders,
    wr,
    diagnosis,
    { workers, pools, poolContext, history: placement?.history ?? NO_HISTORY },
    options,
  );
  return { ...diagnosis, startEstimate };
}
