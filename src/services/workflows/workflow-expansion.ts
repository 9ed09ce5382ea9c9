import type { EntityManager } from '@mikro-orm/postgresql';
import { EnvironmentSchema } from '../../storage/entities/environment.js';
import type { User } from '../../storage/entities/user.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import type { Workspace } from '../../storage/entities/workspace.js';
import { validateTaskInput, type AnalysisError, type WorkRequestAnalysis } from '../../core/tasks/analyze.js';
import { findTask } from '../../core/tasks/registry.js';
import { isOrchestrated, type ChildPlan } from '../../core/tasks/types.js';
import { workflowContext } from '../../core/tasks/workflow-context.js';
import type { Orchestrated } from './request-change.js';
import { analyzeRequest, type AnalysisConfig } from './task-analysis.js';
import { classIdsFor } from '../../scheduler/storage/classes.js';
import { reserveFairKeys } from '../../scheduler/storage/fair-keys.js';

/** A workflow as its expansion reads it: its own input, and who and where it runs for. */
export interface WorkflowRequest {
  workspace: Workspace;
  creator: User;
  taskName: string;
  taskData: unknown;
  userProvidedTags: readonly string[];
  userRequiredTags: readonly string[];
  /** The workflow's id once it has one (the source of its children's tags), null while it is only checked. */
  id: number | null;
}

/** A child ready to be created: its plan, its validated data (defaults filled in) and its analysis now. */
export interface PlannedChild {
  plan: ChildPlan;
  taskData: Record<string, unknown>;
  analysis: Extract<WorkRequestAnalysis, { ok: true }>;
}

/** Every child of a workflow, each analysed as it would be submitted now, or every reason why not. */
export type PlannedChildren = { ok: true; children: PlannedChild[] } | { ok: false; errors: AnalysisError[] };

/**
 * Plans a workflow's children and analyses each one as any request is analysed (the creator's
 * groups, the workspace's and the site's rules, the workflow's own user tags, provenance checks), so
 * that a workflow whose children could not all be created is refused at submission, and is ABORTED
 * rather than half expanded later. Reads only.
 */
export async function planChildren(
  em: EntityManager,
  config: AnalysisConfig,
  request: WorkflowRequest,
): Promise<PlannedChildren> {
  const task = findTask('workflow', request.taskName);
  const parsed = task?.schema.safeParse(request.taskData);
  if (!task?.expand || !parsed?.success)
    throw new Error(`workflow ${request.taskName} was not validated before its expansion`);
  const environments = await em.find(EnvironmentSchema, {});
  const plan = task.expand(
    parsed.data,
    workflowContext(
      environments.map((e) => ({
        id: e.id,
        codename: e.codename,
        architecture: e.architecture,
        variant: e.variant ?? null,
        backend: e.backend ?? null,
      })),
    ),
  );
  if (!plan.ok) return { ok: false, errors: plan.errors };
  const errors: AnalysisError[] = [];
  const children: PlannedChild[] = [];
  for (const child of plan.children) {
    // A child's own fields are the workflow's: a problem with one is reported on the workflow's taskData.
    const inChild = (e: AnalysisError): AnalysisError => ({
      ...e,
      message: `child ${child.key}: ${e.message}`,
      path: e.path?.startsWith('taskData') ? 'taskData' : e.path,
    });
    const validation = validateTaskInput(child.taskType, child.taskName, child.taskData);
    if (!validation.ok) {
      errors.push(inChild(validation.error));
      continue;
    }
    const analysis = await analyzeRequest(em, config, {
      workspace: request.workspace,
      creator: request.creator,
      taskType: child.taskType,
      taskName: child.taskName,
      taskData: validation.data,
      environmentId: validation.environmentId,
      userProvidedTags: request.userProvidedTags,
      userRequiredTags: request.userRequiredTags,
      dataSource: request.id === null ? 'workflow' : `workflow:${request.id}`,
    });
    if (analysis.ok) children.push({ plan: child, taskData: validation.data as Record<string, unknown>, analysis });
    else errors.push(...analysis.errors.map(inChild));
  }
  return errors.length ? { ok: false, errors } : { ok: true, children };
}

/** How a child with nothing to wait for is queued (queue-request.ts's `queueWorkRequest`, handed in by its caller). */
export type QueueChild = (
  em: EntityManager,
  config: AnalysisConfig,
  wr: WorkRequest,
  analysis: WorkRequestAnalysis,
) => Promise<Orchestrated>;

/**
 * PENDING → RUNNING for a workflow: creates all its children in the caller's transaction, which holds
 * the workflow's row (locked, or created by it), so that it is expanded once, and a crash leaves
 * either no children or all of them. Children inherit the workspace, the creator, the priority and
 * the user's tags; those with nothing to wait for become PENDING at once, with the analysis just
 * made; the others wait BLOCKED for their siblings. If the children cannot all be made (an
 * environment or a rule changed since submission), the workflow is ABORTED with the reason and has none.
 */
export async function expandWorkflow(
  em: EntityManager,
  config: AnalysisConfig,
  wr: WorkRequest,
  queueWorkRequest: QueueChild,
): Promise<Orchestrated> {
  await em.flush(); // the workflow's own row first: its children name it
  const [{ expanded }] = await em.execute<{ expanded: boolean }[]>(
    `select exists (select 1 from work_request where parent_id = ?) as expanded`,
    [wr.id],
  );
  if (expanded) throw new Error(`workflow ${wr.id} became PENDING again after its expansion`);
  await em.populate(wr, ['workspace.scope']);
  const now = new Date();
  const planned = await planChildren(em, config, {
    workspace: wr.workspace,
    creator: wr.createdBy,
    taskName: wr.taskName,
    taskData: wr.taskData,
    userProvidedTags: wr.userProvidedTags,
    userRequiredTags: wr.userRequiredTags,
    id: wr.id,
  });
  if (!planned.ok) {
    wr.status = 'ABORTED';
    wr.completedAt = now;
    wr.statusReason = `could not expand the workflow: ${planned.errors.map((e) => e.message).join('; ')}`;
    return { changed: [], finished: [wr.id] };
  }
  wr.status = 'RUNNING';
  wr.startedAt = now;
  const created = new Map<string, WorkRequest>();
  const fairKeys = await reserveFairKeys(em, wr.workspace.id, planned.children.length, now);
  for (const [i, { plan, taskData }] of planned.children.entries()) {
    const child = em.create(WorkRequestSchema, {
      workspace: wr.workspace,
      createdBy: wr.createdBy,
      parent: wr,
      taskType: plan.taskType,
      taskName: plan.taskName,
      taskData,
      priorityBase: wr.priorityBase,
      priorityAdjustment: wr.priorityAdjustment,
      fairKey: fairKeys[i],
      userProvidedTags: wr.userProvidedTags,
      userRequiredTags: wr.userRequiredTags,
    });
    for (const key of plan.dependsOn) child.dependencies.add(created.get(key)!);
    created.set(plan.key, child);
  }
  // A child that waits keeps the class its tags have now, for demand's coming work (scheduler/rules/look-ahead.ts).
  const waiting = planned.children.filter((c) => c.plan.dependsOn.length && !isOrchestrated(c.plan.taskType));
  const expected = await classIdsFor(
    em,
    waiting.map((c) => c.analysis),
  );
  waiting.forEach((c, i) => (created.get(c.plan.key)!.expectedClassId = expected[i]));
  await em.flush(); // the children's ids, which what follows reports
  const finished: number[] = [];
  const changed: Orchestrated['changed'] = [];
  for (const { plan, analysis } of planned.children) {
    if (plan.dependsOn.length) continue;
    const outcome = await queueWorkRequest(em, config, created.get(plan.key)!, analysis);
    changed.push(...outcome.changed);
    finished.push(...outcome.finished);
  }
  if (!created.size) {
    wr.status = 'COMPLETED';
    wr.result = 'SUCCESS';
    wr.completedAt = now;
    finished.push(wr.id);
  }
  await em.flush();
  return {
    changed: [...[...created.values()].map((c) => ({ id: c.id, workspaceId: wr.workspace.id })), ...changed],
    finished,
  };
}
