import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../config.js';
import { WorkRequestSchema, type WorkRequest } from '../entities/work-request.js';
import { ERROR_CODES, ForbiddenError, InputError, InvalidStateError, NotFoundError } from '../errors.js';
import type { Events } from '../events.js';
import { classIdsFor } from '../scheduler/classes.js';
import type { LifecycleRecorder } from '../metrics/recorder.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import { validateTaskInput, type AnalysisError, type WorkRequestAnalysis } from '../tasks/analyze.js';
import { isAdmin, requireUser, type Viewer } from './auth.js';
import { findWorkspace, roleIn } from './directory.js';
import { abortAll, completeFinishedWorkflows, lockOpenDescendants, runOrchestrated, type Orchestrated, type RequestChange } from './orchestration.js';
import { analyzeRequest } from './task-analysis.js';
import { planChildren } from './workflow-expansion.js';
import { checkTags, parseInput } from './validate.js';
import { viewerSeesWorkRequest } from './visibility.js';

/** Input of createWorkRequest. */
export interface CreateWorkRequestInput {
  workspace: string;
  taskType: string;
  taskName: string;
  taskData?: unknown;
  providedTags?: string[] | null;
  requiredTags?: string[] | null;
  priorityBase?: number | null;
  priorityAdjustment?: number | null;
  dependsOn?: (string | number)[] | null;
}

/** The services a work-request operation needs. */
export interface WorkRequestDeps {
  em: EntityManager;
  viewer: Viewer;
  config: Config;
  events: Events;
  scheduler: Scheduler;
  /** Told of completions (the run-time histogram); none when absent. */
  metrics?: LifecycleRecorder;
}

const TERMINAL = ['COMPLETED', 'ABORTED'] as const;

/** All the problems of an analysis, as one typed error (the first is its own code and message). */
function analysisErrorToInput(...errors: AnalysisError[]): InputError {
  return InputError.of(errors.map((e) => ({ code: ERROR_CODES[e.code], message: e.message, path: e.path ? `input.${e.path}` : 'input', tag: e.tag ?? null })));
}

function parseId(raw: string | number, path: string): number {
  const id = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isSafeInteger(id) || id <= 0) throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: "${raw}" is not a work request id`, path);
  return id;
}

/** Finds a work request the viewer may see (others look like missing ones). */
export async function findVisibleWorkRequest(em: EntityManager, viewer: Viewer, rawId: string | number, path = 'id'): Promise<WorkRequest> {
  const id = parseId(rawId, path);
  const wr = await em.findOne(WorkRequestSchema, { id }, { populate: ['workspace', 'workspace.scope'] });
  if (!wr || !(await viewerSeesWorkRequest(em, viewer, wr))) throw new NotFoundError(`${path}: no work request ${rawId}`, path);
  return wr;
}

/**
 * Creates a work request. Everything is checked before anything is written: the task and its data,
 * the tags and who may add them, the environment, the dependencies, the workspace and the viewer's
 * right to submit there. With all dependencies completed it becomes PENDING at once, its tag sets
 * computed and frozen; otherwise it waits BLOCKED.
 */
export async function createWorkRequest(
  deps: WorkRequestDeps,
  input: CreateWorkRequestInput,
  options: { record?: (tx: EntityManager, created: WorkRequest) => Promise<void> } = {},
): Promise<WorkRequest> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const dataSize = Buffer.byteLength(JSON.stringify(input.taskData ?? null), 'utf8');
  if (dataSize > config.maxTaskDataBytes) {
    throw new InputError(ERROR_CODES.TASK_DATA_TOO_LARGE, `input.taskData: ${dataSize} bytes of JSON is over the limit of ${config.maxTaskDataBytes}`, 'input.taskData');
  }
  const providedTags = input.providedTags ?? [];
  const requiredTags = input.requiredTags ?? [];
  checkTags([providedTags, 'provided', 'input.providedTags', config.maxTagsPerSet], [requiredTags, 'required', 'input.requiredTags', config.maxTagsPerSet]);
  const priorityBase = parseInput(z.number().int().min(-1_000_000).max(1_000_000), input.priorityBase ?? 0, 'input.priorityBase');
  const priorityAdjustment = parseInput(z.number().int().min(-1_000_000).max(1_000_000), input.priorityAdjustment ?? 0, 'input.priorityAdjustment');
  if (priorityAdjustment > 0 && !isAdmin(viewer)) throw new ForbiddenError('only admins may raise a priority (positive priorityAdjustment)');

  const workspace = await findWorkspace(em, viewer, input.workspace, 'input.workspace');
  const role = await roleIn(em, viewer, workspace);
  if (!isAdmin(viewer) && (role === null || role === 'viewer')) {
    throw new ForbiddenError(`you may not submit work to workspace "${input.workspace}": only its owners and contributors may`);
  }

  const validation = validateTaskInput(input.taskType, input.taskName, input.taskData);
  if (!validation.ok) throw analysisErrorToInput(validation.error);
  // Analyse now, so that a request that could never be tagged is refused at the door, not later.
  const probe = await analyzeRequest(em, config, {
    workspace,
    creator: user,
    taskType: input.taskType,
    taskName: input.taskName,
    taskData: input.taskData,
    environmentId: validation.environmentId,
    userProvidedTags: providedTags,
    userRequiredTags: requiredTags,
  });
  if (!probe.ok) throw analysisErrorToInput(...probe.errors);
  if (validation.task.type === 'workflow') {
    // Its children too: a workflow that could not be expanded is refused now, not ABORTED later.
    const children = await planChildren(em, config, {
      workspace,
      creator: user,
      taskName: input.taskName,
      taskData: validation.data,
      userProvidedTags: providedTags,
      userRequiredTags: requiredTags,
      id: null,
    });
    if (!children.ok) throw analysisErrorToInput(...children.errors);
  }

  const dependencyIds = [...new Set((input.dependsOn ?? []).map((d, i) => parseId(d, `input.dependsOn[${i}]`)))];
  const { wr, changed } = await em.transactional(async (tx) => {
    // FOR SHARE: a dependency cannot complete between this check and our commit, so none is missed.
    const dependencies = dependencyIds.length
      ? await tx.find(WorkRequestSchema, { id: { $in: dependencyIds } }, { lockMode: LockMode.PESSIMISTIC_READ, populate: ['workspace'] })
      : [];
    for (const id of dependencyIds) {
      const dep = dependencies.find((d) => d.id === id);
      if (!dep || !(await viewerSeesWorkRequest(tx, viewer, dep))) {
        throw new InputError(ERROR_CODES.UNKNOWN_DEPENDENCY, `input.dependsOn: no work request ${id}`, 'input.dependsOn');
      }
      if (dep.status === 'ABORTED') {
        throw new InputError(ERROR_CODES.UNKNOWN_DEPENDENCY, `input.dependsOn: work request ${id} was aborted and will never complete`, 'input.dependsOn');
      }
    }
    const created = tx.create(WorkRequestSchema, {
      workspace,
      createdBy: user,
      taskType: input.taskType,
      taskName: input.taskName,
      taskData: validation.data as Record<string, unknown>,
      priorityBase,
      priorityAdjustment,
      userProvidedTags: providedTags,
      userRequiredTags: requiredTags,
    });
    for (const dep of dependencies) created.dependencies.add(dep);
    let changed: RequestChange[] = [];
    if (dependencies.every((d) => d.status === 'COMPLETED')) {
      const outcome = await queueWorkRequest(tx, config, created, probe); // the tags just computed: nothing changed in between
      await tx.flush();
      changed = [...outcome.changed, ...(await settleDependents(tx, config, outcome.finished))];
    }
    await tx.flush();
    await options.record?.(tx, created); // an idempotency key commits with the request (services/idempotency.ts)
    return { wr: created, changed };
  });
  // Placed first, so that the passes its change triggers (here and in other processes) find it taken.
  if (wr.status === 'PENDING' && wr.classId != null) {
    const placed = await deps.scheduler.placeNew({ id: wr.id, classId: wr.classId });
    if (placed.some((a) => a.workRequestId === wr.id)) await em.refresh(wr); // answer with what it is now: ASSIGNED
  }
  deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: workspace.id });
  for (const change of changed) deps.events.publish('workRequestChanged', change); // a workflow's children
  return wr;
}

/**
 * BLOCKED → PENDING: computes the two task tag sets once and freezes them. If they cannot be
 * computed (a rule or environment changed since submission) the request is ABORTED with the reason
 * and both sets stay empty: never half-tagged, never schedulable. `analysis` is one computed by the
 * caller a moment ago (a request created with nothing to wait for); otherwise it is computed here.
 * What the server runs itself runs now (orchestration.ts): a synchronization point completes, a
 * workflow expands. Returns what that changed, and the requests that finished (to settle).
 */
export async function queueWorkRequest(em: EntityManager, config: Config, wr: WorkRequest, analysis?: WorkRequestAnalysis): Promise<Orchestrated> {
  analysis ??= await analyzeQueued(em, config, wr);
  const now = new Date();
  if (!analysis.ok) {
    wr.status = 'ABORTED';
    wr.completedAt = now;
    wr.statusReason = `could not compute the task tags: ${analysis.errors.map((e) => e.message).join('; ')}`;
    return { changed: [], finished: [wr.id] };
  }
  wr.status = 'PENDING';
  wr.pendingAt = now;
  wr.providedTags = analysis.providedTags;
  wr.requiredTags = analysis.requiredTags;
  wr.providedEntries = analysis.provided;
  wr.requiredEntries = analysis.required;
  wr.droppedTags = analysis.dropped;
  [wr.classId] = await classIdsFor(em, [{ providedTags: wr.providedTags, requiredTags: wr.requiredTags }]);
  return runOrchestrated(em, config, wr);
}

/** The analysis of a stored request, as it would be submitted now. */
async function analyzeQueued(em: EntityManager, config: Config, wr: WorkRequest): Promise<WorkRequestAnalysis> {
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
  });
}

/**
 * After requests finished: dependents whose dependencies are now all COMPLETED become PENDING (and
 * what the server runs itself runs: orchestration.ts), dependents of an ABORTED request are aborted
 * too (they could never run), and workflows whose children have all finished complete. What finishes
 * on the way is settled in turn. Returns the requests it changed, for the caller to publish.
 */
export async function settleDependents(em: EntityManager, config: Config, finishedIds: number[]): Promise<RequestChange[]> {
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
      ? await em.find(WorkRequestSchema, { id: { $in: rows.map((r) => r.id) }, status: 'BLOCKED' }, { populate: ['dependencies', 'workspace', 'createdBy'], lockMode: LockMode.PESSIMISTIC_WRITE })
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

/** Aborts a request that has not finished. The creator, the workspace's owners and admins may. */
export async function abortWorkRequest(deps: WorkRequestDeps, rawId: string | number): Promise<WorkRequest> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const wr = await findVisibleWorkRequest(em, viewer, rawId);
  const mayAbort = isAdmin(viewer) || wr.createdBy.id === user.id || (await roleIn(em, viewer, wr.workspace)) === 'owner';
  if (!mayAbort) throw new ForbiddenError('only the creator, the workspace owners and admins may abort a work request');
  if ((TERMINAL as readonly string[]).includes(wr.status)) throw new InvalidStateError(`work request ${wr.id} is already ${wr.status}`);
  const changed = await em.transactional(async (tx) => {
    // A workflow's open children are locked before it, as the completion of a child locks them (orchestration.ts).
    const children = await lockOpenDescendants(tx, wr.id);
    const locked = await tx.findOneOrFail(WorkRequestSchema, { id: wr.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if ((TERMINAL as readonly string[]).includes(locked.status)) throw new InvalidStateError(`work request ${wr.id} is already ${locked.status}`);
    locked.status = 'ABORTED';
    locked.completedAt = new Date();
    locked.statusReason = `aborted by ${user.username}`;
    // Children that an expansion committed while this waited for the workflow's lock are open too.
    const late = (await lockOpenDescendants(tx, wr.id)).filter((c) => !children.includes(c));
    const aborted = abortAll([...children, ...late], `workflow ${wr.id} was aborted by ${user.username}`);
    await tx.flush();
    return [{ id: locked.id, workspaceId: wr.workspace.id }, ...aborted, ...(await settleDependents(tx, config, [locked.id, ...aborted.map((a) => a.id)]))];
  });
  await em.refresh(wr);
  for (const change of changed) deps.events.publish('workRequestChanged', change);
  deps.scheduler.trigger('work-finished');
  return wr;
}

/** Adds dependencies to a BLOCKED request; a dependency cycle is refused. */
export async function addWorkRequestDependencies(deps: WorkRequestDeps, rawId: string | number, rawDependsOn: (string | number)[]): Promise<WorkRequest> {
  const { em, viewer } = deps;
  const { user } = requireUser(viewer);
  const wr = await findVisibleWorkRequest(em, viewer, rawId);
  if (!isAdmin(viewer) && wr.createdBy.id !== user.id) throw new ForbiddenError('only the creator and admins may change dependencies');
  const ids = [...new Set(rawDependsOn.map((d, i) => parseId(d, `dependsOn[${i}]`)))];
  await em.transactional(async (tx) => {
    const locked = await tx.findOneOrFail(WorkRequestSchema, { id: wr.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['dependencies'] });
    if (locked.status !== 'BLOCKED') throw new InvalidStateError(`work request ${wr.id} is ${locked.status}: dependencies can only be added while it is BLOCKED`);
    const targets = await tx.find(WorkRequestSchema, { id: { $in: ids } }, { populate: ['workspace'] });
    for (const id of ids) {
      const target = targets.find((t) => t.id === id);
      if (!target || !(await viewerSeesWorkRequest(tx, viewer, target))) throw new InputError(ERROR_CODES.UNKNOWN_DEPENDENCY, `dependsOn: no work request ${id}`, 'dependsOn');
      if (target.status === 'ABORTED') throw new InputError(ERROR_CODES.UNKNOWN_DEPENDENCY, `dependsOn: work request ${id} was aborted and will never complete`, 'dependsOn');
    }
    // A cycle exists when the request is reachable from one of its new dependencies.
    const [{ cycle }] = await tx.execute<{ cycle: boolean }[]>(
      `with recursive reach(id) as (
         select unnest(?::int[])
         union select d.depends_on_id from work_request_dependency d join reach r on d.work_request_id = r.id
       ) select exists(select 1 from reach where id = ?) as cycle`,
      [`{${ids.join(',')}}`, wr.id],
    );
    if (cycle) throw new InputError(ERROR_CODES.DEPENDENCY_CYCLE, `dependsOn: work request ${wr.id} would depend on itself through ${ids.join(', ')}`, 'dependsOn');
    for (const t of targets) locked.dependencies.add(t);
    await tx.flush();
  });
  await em.refresh(wr, { populate: ['dependencies'] });
  return wr;
}
