import { fairKeysFor } from '../../scheduler/fair-share.js';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { WorkRequestSchema, type WorkRequest } from '../../entities/work-request.js';
import type { Workspace } from '../../entities/workspace.js';
import { AppError, ERROR_CODES, ForbiddenError, InputError, type InputProblem } from '../../errors.js';
import { intArray } from '../../db/arrays.js';
import { classIdsFor } from '../../scheduler/classes.js';
import { validateTaskInput, type AnalysisError, type WorkRequestAnalysis } from '../../tasks/analyze.js';
import { isOrchestrated } from '../../tasks/types.js';
import { isAdmin, requireUser } from '../identity/auth.js';
import { findWorkspace, roleIn } from '../identity/directory.js';
import { runOrchestrated } from '../workflows/queue-request.js';
import type { RequestChange } from '../workflows/request-change.js';
import { AnalysisSources, analyzeRequest } from '../workflows/task-analysis.js';
import { checkTags, parseInput } from '../input/validate.js';
import { viewerSeesWorkRequest } from '../identity/visibility.js';
import { planChildren } from '../workflows/workflow-expansion.js';
import { freezeAnalysis } from '../workflows/queue-request.js';
import { settleDependents } from '../workflows/settle-dependents.js';
import type { WorkRequestDeps } from './work-requests.js';

/** Input of createWorkRequest, and of each request of createWorkRequests. */
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

/** Records what a create made inside its transaction (an idempotency key: services/work/idempotency.ts). */
export type RecordCreated<T> = (tx: EntityManager, created: T) => Promise<void>;

/** One request checked and analysed, ready to be written. */
interface PreparedCreate {
  /** Where it sits in the input: `input`, or `input.requests[3]` in a batch. */
  readonly path: string;
  readonly input: CreateWorkRequestInput;
  readonly workspace: Workspace;
  readonly taskData: Record<string, unknown>;
  readonly priorityBase: number;
  readonly priorityAdjustment: number;
  readonly providedTags: string[];
  readonly requiredTags: string[];
  readonly dependencyIds: number[];
  readonly analysis: WorkRequestAnalysis;
}

/** What the creates of one operation look up once: workspaces and the viewer's right to submit there, analysis rows. */
interface CreateLookups {
  readonly workspaces: Map<string, Workspace>;
  readonly allowed: Map<number, boolean>;
  readonly analysis: AnalysisSources;
}

const priority = z.number().int().min(-1_000_000).max(1_000_000);

/** All the problems of an analysis, as one typed error (the first is its own code and message); paths under `base`. */
function analysisErrorToInput(base: string, errors: AnalysisError[]): InputError {
  return InputError.of(errors.map((e) => ({ code: ERROR_CODES[e.code], message: e.message, path: e.path ? `${base}.${e.path}` : base, tag: e.tag ?? null })));
}

function parseId(raw: string | number, path: string): number {
  const id = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isSafeInteger(id) || id <= 0) throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: "${raw}" is not a work request id`, path);
  return id;
}

/**
 * Checks and analyses one request before anything is written: the task and its data, the tags and
 * who may add them, the environment, the workspace and the viewer's right to submit there (a
 * workflow's children too). Throws the typed error of the first check that fails, paths under `path`.
 */
async function prepareCreate(deps: WorkRequestDeps, lookups: CreateLookups, input: CreateWorkRequestInput, path: string): Promise<PreparedCreate> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const dataSize = Buffer.byteLength(JSON.stringify(input.taskData ?? null), 'utf8');
  if (dataSize > config.maxTaskDataBytes) {
    throw new InputError(ERROR_CODES.TASK_DATA_TOO_LARGE, `${path}.taskData: ${dataSize} bytes of JSON is over the limit of ${config.maxTaskDataBytes}`, `${path}.taskData`);
  }
  const providedTags = input.providedTags ?? [];
  const requiredTags = input.requiredTags ?? [];
  checkTags([providedTags, 'provided', `${path}.providedTags`, config.maxTagsPerSet], [requiredTags, 'required', `${path}.requiredTags`, config.maxTagsPerSet]);
  const priorityBase = parseInput(priority, input.priorityBase ?? 0, `${path}.priorityBase`);
  const priorityAdjustment = parseInput(priority, input.priorityAdjustment ?? 0, `${path}.priorityAdjustment`);
  if (priorityAdjustment > 0 && !isAdmin(viewer)) throw new ForbiddenError(`${path}.priorityAdjustment: only admins may raise a priority (positive priorityAdjustment)`);
  const dependencyIds = [...new Set((input.dependsOn ?? []).map((d, i) => parseId(d, `${path}.dependsOn[${i}]`)))];

  let workspace = lookups.workspaces.get(input.workspace);
  if (!workspace) {
    workspace = await findWorkspace(em, viewer, input.workspace, `${path}.workspace`);
    lookups.workspaces.set(input.workspace, workspace);
  }
  let allowed = lookups.allowed.get(workspace.id);
  if (allowed === undefined) {
    const role = await roleIn(em, viewer, workspace);
    allowed = isAdmin(viewer) || role === 'owner' || role === 'contributor';
    lookups.allowed.set(workspace.id, allowed);
  }
  if (!allowed) throw new ForbiddenError(`you may not submit work to workspace "${input.workspace}": only its owners and contributors may`);

  const validation = validateTaskInput(input.taskType, input.taskName, input.taskData);
  if (!validation.ok) throw analysisErrorToInput(path, [validation.error]);
  // Analysed now, so that a request that could never be tagged is refused at the door, not later.
  const analysis = await analyzeRequest(
    em,
    config,
    {
      workspace,
      creator: user,
      taskType: input.taskType,
      taskName: input.taskName,
      taskData: input.taskData,
      environmentId: validation.environmentId,
      userProvidedTags: providedTags,
      userRequiredTags: requiredTags,
    },
    lookups.analysis,
  );
  if (!analysis.ok) throw analysisErrorToInput(path, analysis.errors);
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
    if (!children.ok) throw analysisErrorToInput(path, children.errors);
  }
  return { path, input, workspace, taskData: validation.data as Record<string, unknown>, priorityBase, priorityAdjustment, providedTags, requiredTags, dependencyIds, analysis };
}

/** A batch lists at most this many problems: a thousand bad requests must not make a megabyte of answer. */
const MAX_LISTED_PROBLEMS = 100;

/**
 * Writes prepared requests in one transaction, all or none: the dependencies are locked and checked
 * (every problem named), the tag sets of those with nothing to wait for frozen and their classes
 * found in one call, the rows and their dependencies inserted in one statement each, and what the
 * server runs itself run (orchestration.ts). Returns the requests in input order and what else changed.
 */
async function writeCreates(
  deps: WorkRequestDeps,
  prepared: readonly PreparedCreate[],
  record?: (tx: EntityManager, created: WorkRequest[]) => Promise<void>,
): Promise<{ created: WorkRequest[]; changed: RequestChange[] }> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const dependencyIds = [...new Set(prepared.flatMap((p) => p.dependencyIds))];
  return em.transactional(async (tx) => {
    // FOR SHARE: a dependency cannot complete between this check and our commit, so none is missed.
    const found = dependencyIds.length ? await tx.find(WorkRequestSchema, { id: { $in: dependencyIds } }, { lockMode: LockMode.PESSIMISTIC_READ, populate: ['workspace'] }) : [];
    const visible = new Map<number, WorkRequest>();
    for (const dep of found) if (await viewerSeesWorkRequest(tx, viewer, dep)) visible.set(dep.id, dep);
    const problems: InputProblem[] = [];
    for (const p of prepared) {
      for (const id of p.dependencyIds) {
        const dep = visible.get(id);
        const path = `${p.path}.dependsOn`;
        if (!dep) problems.push({ code: ERROR_CODES.UNKNOWN_DEPENDENCY, message: `${path}: no work request ${id}`, path, tag: null });
        else if (dep.status === 'ABORTED')
          problems.push({ code: ERROR_CODES.UNKNOWN_DEPENDENCY, message: `${path}: work request ${id} was aborted and will never complete`, path, tag: null });
      }
    }
    if (problems.length) throw InputError.of(problems);

    // The rows, in input order; those with nothing to wait for PENDING now, with the tags just
    // computed (nothing changed in between), their classes found in one call.
    const now = new Date();
    const rows = prepared.map((p) => {
      const row = {
        workspace: p.workspace.id,
        createdBy: user.id,
        taskType: p.input.taskType,
        taskName: p.input.taskName,
        taskData: p.taskData,
        priorityBase: p.priorityBase,
        priorityAdjustment: p.priorityAdjustment,
        userProvidedTags: p.providedTags,
        userRequiredTags: p.requiredTags,
        createdAt: now,
        status: 'BLOCKED' as WorkRequest['status'],
        pendingAt: null as Date | null,
        completedAt: null as Date | null,
        statusReason: null as string | null,
        providedTags: [] as string[],
        requiredTags: [] as string[],
        providedEntries: [] as WorkRequest['providedEntries'],
        requiredEntries: [] as WorkRequest['requiredEntries'],
        droppedTags: [] as WorkRequest['droppedTags'],
        classId: null as number | null,
      };
      const waits = p.dependencyIds.some((id) => visible.get(id)!.status !== 'COMPLETED');
      if (!waits) freezeAnalysis(row, p.analysis, now);
      return row;
    });
    // Each request's place among workspaces at equal priority (fair share), one clock update per workspace.
    const fairKeys = await fairKeysFor(
      tx,
      rows.map((r) => r.workspace),
      now,
    );
    const keyed = rows.map((r, i) => ({ ...r, fairKey: fairKeys[i] }));
    const ready = keyed.filter((r) => r.status === 'PENDING');
    const classIds = await classIdsFor(tx, ready);
    ready.forEach((r, i) => (r.classId = classIds[i]));
    // One multi-row insert, without the unit of work's bookkeeping of a thousand new entities.
    // (The driver's own call: EntityManager.insertMany answers only the first id on PostgreSQL.)
    const inserted = await tx.getDriver().nativeInsertMany<WorkRequest>(WorkRequestSchema.meta.className, keyed as never, { ctx: tx.getTransactionContext() });
    const ids = (inserted.rows ?? []).map((r) => Number(r.id));
    if (ids.length !== keyed.length) throw new Error(`inserted ${keyed.length} work requests, got ${ids.length} ids back`);
    const links = prepared.flatMap((p, i) => p.dependencyIds.map((dep) => [ids[i], dep] as const));
    if (links.length) {
      await tx.execute(`insert into work_request_dependency (work_request_id, depends_on_id) select * from unnest(?::int[], ?::int[])`, [
        intArray(links.map((l) => l[0])),
        intArray(links.map((l) => l[1])),
      ]);
    }
    const byId = new Map((await tx.find(WorkRequestSchema, { id: { $in: ids } })).map((wr) => [wr.id, wr]));
    const created = ids.map((id) => byId.get(id)!);
    // What the server runs itself (orchestration.ts) runs now.
    const changed: RequestChange[] = [];
    const finished = created.filter((wr) => wr.status === 'ABORTED').map((wr) => wr.id);
    const orchestrated = created.filter((wr) => wr.status === 'PENDING' && isOrchestrated(wr.taskType));
    if (orchestrated.length) await tx.populate(orchestrated, ['workspace.scope', 'createdBy']);
    for (const wr of orchestrated) {
      const outcome = await runOrchestrated(tx, config, wr);
      changed.push(...outcome.changed);
      finished.push(...outcome.finished);
    }
    await tx.flush();
    if (finished.length) changed.push(...(await settleDependents(tx, config, finished)));
    await record?.(tx, created); // an idempotency key commits with the requests (services/work/idempotency.ts)
    return { created, changed };
  });
}

/**
 * Creates a work request. Everything is checked before anything is written (prepareCreate), then
 * the dependencies. With all dependencies completed it becomes PENDING at once, its tag sets
 * computed and frozen, and is placed on a free worker if there is one; otherwise it waits BLOCKED.
 */
export async function createWorkRequest(deps: WorkRequestDeps, input: CreateWorkRequestInput, options: { record?: RecordCreated<WorkRequest> } = {}): Promise<WorkRequest> {
  const lookups: CreateLookups = { workspaces: new Map(), allowed: new Map(), analysis: new AnalysisSources(deps.em) };
  const prepared = await prepareCreate(deps, lookups, input, 'input');
  const record = options.record;
  const {
    created: [wr],
    changed,
  } = await writeCreates(deps, [prepared], record && ((tx, created) => record(tx, created[0])));
  // Placed before its change is published: a request placed at once is published once, by its
  // placement, as ASSIGNED, and that asks no pass of any process (changeMayAllowAssignments).
  let placed = false;
  if (wr.status === 'PENDING' && wr.classId != null) {
    placed = (await deps.scheduler.placeNew({ id: wr.id, classId: wr.classId, taskType: wr.taskType, taskName: wr.taskName })).some((a) => a.workRequestId === wr.id);
    if (placed) await deps.em.refresh(wr); // answer with what it is now: ASSIGNED
  }
  if (!placed) deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: prepared.workspace.id, status: wr.status });
  for (const change of changed) deps.events.publish('workRequestChanged', change); // a workflow's children
  return wr;
}

/** A refusal other than bad input (a missing workspace, a forbidden one), its message naming the request of the batch it came from. */
function named(err: unknown, path: string): unknown {
  if (!(err instanceof AppError) || err.message.startsWith(path)) return err;
  err.message = `${path}: ${err.message}`;
  return err;
}

/**
 * Creates many work requests at once, all or none: each is checked and analysed as one
 * createWorkRequest is (prepareCreate), every refused request is named (its index and field) in one
 * typed error, and the rows are written in one transaction. No request is placed one by one: a pass
 * (triggered by their events) places them in bulk.
 */
export async function createWorkRequests(
  deps: WorkRequestDeps,
  inputs: readonly CreateWorkRequestInput[],
  options: { record?: RecordCreated<WorkRequest[]> } = {},
): Promise<WorkRequest[]> {
  requireUser(deps.viewer);
  const most = deps.config.maxBatchRequests;
  if (inputs.length === 0) throw new InputError(ERROR_CODES.INVALID_INPUT, 'input.requests: give at least one request', 'input.requests');
  if (inputs.length > most) {
    throw new InputError(
      ERROR_CODES.INVALID_INPUT,
      `input.requests: at most ${most} requests are accepted in one call (TAGSCHED_MAX_BATCH_REQUESTS), got ${inputs.length}`,
      'input.requests',
    );
  }
  const lookups: CreateLookups = { workspaces: new Map(), allowed: new Map(), analysis: new AnalysisSources(deps.em) };
  const prepared: PreparedCreate[] = [];
  const problems: InputProblem[] = [];
  for (const [i, input] of inputs.entries()) {
    const path = `input.requests[${i}]`;
    try {
      prepared.push(await prepareCreate(deps, lookups, input, path));
    } catch (err) {
      if (!(err instanceof InputError)) throw named(err, path); // not found, forbidden: the batch is refused as such
      problems.push(...err.problems);
    }
  }
  if (problems.length) throw InputError.of(problems.slice(0, MAX_LISTED_PROBLEMS));
  const { created, changed } = await writeCreates(deps, prepared, options.record);
  for (const [i, wr] of created.entries()) deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: prepared[i].workspace.id, status: wr.status });
  for (const change of changed) deps.events.publish('workRequestChanged', change);
  return created;
}
