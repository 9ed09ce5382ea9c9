/**
 * BLOCKED → PENDING, and what the server runs itself at that moment (orchestration.ts): a
 * synchronization point completes, a workflow expands (workflow-expansion.ts) and its children with
 * nothing to wait for are queued in turn. Queueing and running are one recursion (a child may be a
 * workflow), so they live in this one module; the expansion is handed `queueWorkRequest`.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkRequest } from '../../storage/entities/work-request.js';
import { classIdsFor } from '../../scheduler/storage/classes.js';
import { validateTaskInput, type WorkRequestAnalysis } from '../../core/tasks/analyze.js';
import type { Orchestrated } from './request-change.js';
import { analyzeRequest, type AnalysisConfig } from './task-analysis.js';
import { expandWorkflow } from './workflow-expansion.js';

/**
 * BLOCKED → PENDING: computes the two task tag sets and the resources it reserves once and freezes them. If they cannot be
 * computed (a rule or environment changed since submission) the request is ABORTED with the reason
 * and both sets stay empty: never half-tagged, never schedulable. `analysis` is one computed by the
 * caller a moment ago (a request created with nothing to wait for); otherwise it is computed here.
 * What the server runs itself runs now (orchestration.ts): a synchronization point completes, a
 * workflow expands. Returns what that changed, and the requests that finished (to settle).
 */
export async function queueWorkRequest(
  em: EntityManager,
  config: AnalysisConfig,
  wr: WorkRequest,
  analysis?: WorkRequestAnalysis,
): Promise<Orchestrated> {
  analysis ??= await analyzeQueued(em, config, wr);
  if (!freezeAnalysis(wr, analysis, new Date())) return { changed: [], finished: [wr.id] };
  [wr.classId] = await classIdsFor(em, [{ providedTags: wr.providedTags, requiredTags: wr.requiredTags }]);
  return runOrchestrated(em, config, wr);
}

/**
 * The state change of BLOCKED → PENDING without its class (the caller finds it, for one request or
 * many at once): PENDING with both tag sets frozen, or ABORTED with the reason when the analysis
 * failed. Returns whether it became PENDING.
 */
export function freezeAnalysis(
  wr: Pick<
    WorkRequest,
    | 'status'
    | 'completedAt'
    | 'statusReason'
    | 'pendingAt'
    | 'providedTags'
    | 'requiredTags'
    | 'providedEntries'
    | 'requiredEntries'
    | 'droppedTags'
    | 'reservedCpus'
    | 'reservedMemoryMib'
    | 'reservedDiskMib'
    | 'resourceSources'
  >,
  analysis: WorkRequestAnalysis,
  now: Date,
): boolean {
  if (!analysis.ok) {
    wr.status = 'ABORTED';
    wr.completedAt = now;
    wr.statusReason = `could not compute the task tags: ${analysis.errors.map((e) => e.message).join('; ')}`;
    return false;
  }
  wr.status = 'PENDING';
  wr.pendingAt = now;
  wr.providedTags = analysis.providedTags;
  wr.requiredTags = analysis.requiredTags;
  wr.providedEntries = analysis.provided;
  wr.requiredEntries = analysis.required;
  wr.droppedTags = analysis.dropped;
  wr.reservedCpus = analysis.resources.resources.cpus;
  wr.reservedMemoryMib = analysis.resources.resources.memoryMib;
  wr.reservedDiskMib = analysis.resources.resources.diskMib;
  wr.resourceSources = analysis.resources.sources;
  return true;
}

/** The analysis of a stored request, as it would be submitted now. */
async function analyzeQueued(em: EntityManager, config: AnalysisConfig, wr: WorkRequest): Promise<WorkRequestAnalysis> {
  const workspace = wr.workspace;
  await em.populate(workspace, ['scope']);
  const validation = validateTaskInput(wr.taskType, wr.taskName, wr.taskData);
  if (!validation.ok) return { ok: false, errors: [validation.error] };
  return analyzeRequest(em, config, {
    workspace,
    creator: wr.createdBy,
    taskType: wr.taskType,
    taskName: wr.taskName,
    taskData: wr.taskData,
    environmentId: validation.environmentId,
    userProvidedTags: wr.userProvidedTags,
    userRequiredTags: wr.userRequiredTags,
    dataSource: wr.parent ? `workflow:${wr.parent.id}` : null,
    userResources: wr.userResources ?? null,
  });
}

/** Runs what the server runs itself for a request that has just become PENDING; other requests are left as they are. */
export async function runOrchestrated(
  em: EntityManager,
  config: AnalysisConfig,
  wr: WorkRequest,
): Promise<Orchestrated> {
  if (wr.taskType === 'workflow') return expandWorkflow(em, config, wr, queueWorkRequest);
  if (wr.taskType === 'internal') {
    const now = new Date();
    wr.status = 'COMPLETED';
    wr.result = 'SUCCESS';
    wr.startedAt = now;
    wr.completedAt = now;
    await em.flush();
    return { changed: [], finished: [wr.id] };
  }
  return { changed: [], finished: [] };
}
