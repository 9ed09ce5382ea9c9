import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { WorkRequestSchema, type WorkRequest } from '../entities/work-request.js';
import { ERROR_CODES, ForbiddenError, InputError, InvalidStateError, NotFoundError } from '../errors.js';
import type { Events } from '../events.js';
import { classIdsFor } from '../scheduler/storage/classes.js';
import type { LifecycleRecorder } from '../metrics/recorder.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import { validateTaskInput, type WorkRequestAnalysis } from '../tasks/analyze.js';
import { isAdmin, requireUser, type Viewer } from './auth.js';
import { roleIn } from './directory.js';
import { abortAll, completeFinishedWorkflows, lockOpenDescendants, runOrchestrated, type Orchestrated, type RequestChange } from './orchestration.js';
import { analyzeRequest } from './task-analysis.js';
import { viewerSeesWorkRequest } from './visibility.js';

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
 * BLOCKED → PENDING: computes the two task tag sets once and freezes them. If they cannot be
 * computed (a rule or environment changed since submission) the request is ABORTED with the reason
 * and both sets stay empty: never half-tagged, never schedulable. `analysis` is one computed by the
 * caller a moment ago (a request created with nothing to wait for); otherwise it is computed here.
 * What the server runs itself runs now (orchestration.ts): a synchronization point completes, a
 * workflow expands. Returns what that changed, and the requests that finished (to settle).
 */
export async function queueWorkRequest(em: EntityManager, config: Config, wr: WorkRequest, analysis?: WorkRequestAnalysis): Promise<Orchestrated> {
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
  wr: Pick<WorkRequest, 'status' | 'completedAt' | 'statusReason' | 'pendingAt' | 'providedTags' | 'requiredTags' | 'providedEntries' | 'requiredEntries' | 'droppedTags'>,
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
  return true;
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
