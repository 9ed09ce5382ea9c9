import { LockMode, Utils } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { WorkRequestSchema, type WorkRequest, type WorkRequestRecord } from '../../storage/entities/work-request.js';
import type { User } from '../../storage/entities/user.js';
import type { Workspace } from '../../storage/entities/workspace.js';
import { AppError, ERROR_CODES, ForbiddenError, InputError, type InputProblem } from '../../core/errors.js';
import { intArray } from '../../storage/db/arrays.js';
import { executeBound } from '../../storage/db/bound.js';
import {
  validateTaskInput,
  type AnalysisError,
  type TaskInputValidation,
  type WorkRequestAnalysis,
} from '../../core/tasks/analyze.js';
import { isOrchestrated } from '../../core/tasks/types.js';
import { givenFigures, type PartialResources } from '../../core/tasks/resource-request.js';
import { checkResourceInput } from '../input/resource-input.js';
import { isAdmin, requireUser, type Viewer } from '../identity/auth.js';
import { findWorkspace, roleIn } from '../identity/directory.js';
import { runOrchestrated, freezeAnalysis } from '../workflows/queue-request.js';
import type { RequestChange } from '../workflows/request-change.js';
import { AnalysisSources, analyzeRequest } from '../workflows/task-analysis.js';
import { checkTags, jsonKey, parseInput } from '../input/validate.js';
import { viewerSeesWorkRequest } from '../identity/visibility.js';
import { planChildren } from '../workflows/workflow-expansion.js';
import { settleDependents } from '../workflows/settle-dependents.js';
import type { WorkRequestDeps } from './work-requests.js';
import { classIdsFor } from '../../scheduler/storage/classes.js';
import { fairKeysFor } from '../../scheduler/storage/fair-keys.js';

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
  /** What it reserves of a worker that shares its resources, figure by figure (core/tasks/resource-request.ts). */
  resources?: PartialResources | null;
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
  readonly userResources: PartialResources | null;
}

/** What the creates of one operation look up once: workspaces and the viewer's right to submit there, task data checks, analyses. */
interface CreateLookups {
  readonly workspaces: Map<string, Workspace>;
  readonly allowed: Map<number, boolean>;
  /** validateTaskInput's answer by task and data (jsonKey). */
  readonly validations: Map<string, TaskInputValidation>;
  readonly analysis: AnalysisSources;
}

function newLookups(em: EntityManager): CreateLookups {
  return { workspaces: new Map(), allowed: new Map(), validations: new Map(), analysis: new AnalysisSources(em) };
}

const priority = z.number().int().min(-1_000_000).max(1_000_000);

/** All the problems of an analysis, as one typed error (the first is its own code and message); paths under `base`. */
function analysisErrorToInput(base: string, errors: AnalysisError[]): InputError {
  return InputError.of(
    errors.map((e) => ({
      code: ERROR_CODES[e.code],
      message: e.message,
      path: e.path ? `${base}.${e.path}` : base,
      tag: e.tag ?? null,
    })),
  );
}

/** The figures a user gave, and nothing else of the input object (GraphQL hands over its keys as given). */
function parseId(raw: string | number, path: string): number {
  const id = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isSafeInteger(id) || id <= 0)
    throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: "${raw}" is not a work request id`, path);
  return id;
}

/**
 * Checks and analyses one request before anything is written: the task and its data, the tags and
 * who may add them, the environment, the workspace and the viewer's right to submit there (a
 * workflow's children too). Throws the typed error of the first check that fails, paths under `path`.
 */
async function prepareCreate(
  deps: WorkRequestDeps,
  lookups: CreateLookups,
  input: CreateWorkRequestInput,
  path: string,
): Promise<PreparedCreate> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const dataKey = jsonKey(input.taskData ?? null);
  const dataSize = Buffer.byteLength(dataKey ?? JSON.stringify(input.taskData ?? null), 'utf8');
  if (dataSize > config.input.maxTaskDataBytes) {
    throw new InputError(
      ERROR_CODES.TASK_DATA_TOO_LARGE,
      `${path}.taskData: ${dataSize} bytes of JSON is over the limit of ${config.input.maxTaskDataBytes}`,
      `${path}.taskData`,
    );
  }
  const providedTags = input.providedTags ?? [];
  const requiredTags = input.requiredTags ?? [];
  checkTags(
    [providedTags, 'provided', `${path}.providedTags`, config.input.maxTagsPerSet],
    [requiredTags, 'required', `${path}.requiredTags`, config.input.maxTagsPerSet],
  );
  const priorityBase = parseInput(priority, input.priorityBase ?? 0, `${path}.priorityBase`);
  const priorityAdjustment = parseInput(priority, input.priorityAdjustment ?? 0, `${path}.priorityAdjustment`);
  if (priorityAdjustment > 0 && !isAdmin(viewer))
    throw new ForbiddenError(
      `${path}.priorityAdjustment: only admins may raise a priority (positive priorityAdjustment)`,
    );
  const dependencyIds = [...new Set((input.dependsOn ?? []).map((d, i) => parseId(d, `${path}.dependsOn[${i}]`)))];
  checkResourceInput(input.resources, `${path}.resources`, ERROR_CODES.INVALID_INPUT);
  const userResources = input.resources ? givenFigures(input.resources) : null;

  let workspace = lookups.workspaces.get(input.workspace);
  if (!workspace) {
    workspace = await findWorkspace(em, viewer, input.workspace, `${path}.workspace`);
    lookups.workspaces.set(input.workspace, workspace);
  }
  let allowed = lookups.allowed.get(workspace.id);
  if (allowed === undefined) {
    // An admin may submit anywhere: its role is read only for other users.
    const role = isAdmin(viewer) ? null : await roleIn(em, viewer, workspace);
    allowed = isAdmin(viewer) || role === 'owner' || role === 'contributor';
    lookups.allowed.set(workspace.id, allowed);
  }
  if (!allowed)
    throw new ForbiddenError(
      `you may not submit work to workspace "${input.workspace}": only its owners and contributors may`,
    );

  // The same task and data validate alike: checked once per batch (the check is pure).
  const validationKey = dataKey === null ? null : `${JSON.stringify([input.taskType, input.taskName])}${dataKey}`;
  let validation = validationKey === null ? undefined : lookups.validations.get(validationKey);
  if (!validation) {
    validation = validateTaskInput(input.taskType, input.taskName, input.taskData);
    if (validationKey !== null) lookups.validations.set(validationKey, validation);
  }
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
      userResources,
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
  return {
    path,
    input,
    workspace,
    taskData: validation.data as Record<string, unknown>,
    priorityBase,
    priorityAdjustment,
    providedTags,
    requiredTags,
    dependencyIds,
    analysis,
    userResources,
  };
}

/** What a create writes of a new work request; the other columns take their defaults (writtenEntity). */
type NewRow = Pick<
  WorkRequest,
  | 'taskType'
  | 'taskName'
  | 'taskData'
  | 'priorityBase'
  | 'priorityAdjustment'
  | 'userProvidedTags'
  | 'userRequiredTags'
  | 'createdAt'
  | 'status'
  | 'pendingAt'
  | 'completedAt'
  | 'statusReason'
  | 'providedTags'
  | 'requiredTags'
  | 'providedEntries'
  | 'requiredEntries'
  | 'droppedTags'
  | 'classId'
  | 'expectedClassId'
  | 'fairKey'
  | 'userResources'
  | 'reservedCpus'
  | 'reservedMemoryMib'
  | 'reservedDiskMib'
  | 'resourceSources'
> & { workspace: number; createdBy: number };

/** Distinct JSON texts, numbered from 1 in the order first seen (as `with ordinality` numbers a JSON array's elements). */
class Distinct {
  private readonly numbers = new Map<string, number>();
  number(json: string): number {
    let n = this.numbers.get(json);
    if (n === undefined) this.numbers.set(json, (n = this.numbers.size + 1));
    return n;
  }
  /** The texts as one JSON array, in their numbers' order. */
  json(): string {
    return `[${[...this.numbers.keys()].join(',')}]`;
  }
}

/** A column a create writes: its name, its SQL type, and its value in a row. */
type Column = readonly [
  name: string,
  type: 'int' | 'bigint' | 'text' | 'timestamptz' | 'text[]' | 'jsonb',
  value: (r: NewRow) => unknown,
];

/** The columns each row sends of its own, as the elements of a JSON array in this order. */
const OWN_COLUMNS: readonly Column[] = [
  ['workspace_id', 'int', (r) => r.workspace],
  ['created_by_id', 'int', (r) => r.createdBy],
  ['task_type', 'text', (r) => r.taskType],
  ['task_name', 'text', (r) => r.taskName],
  ['priority_base', 'int', (r) => r.priorityBase],
  ['priority_adjustment', 'int', (r) => r.priorityAdjustment],
  ['created_at', 'timestamptz', (r) => r.createdAt],
  ['status', 'text', (r) => r.status],
  ['pending_at', 'timestamptz', (r) => r.pendingAt],
  ['completed_at', 'timestamptz', (r) => r.completedAt],
  ['status_reason', 'text', (r) => r.statusReason],
  ['class_id', 'int', (r) => r.classId],
  ['expected_class_id', 'int', (r) => r.expectedClassId],
  ['fair_key', 'bigint', (r) => r.fairKey],
  ['user_resources', 'jsonb', (r) => r.userResources],
  ['reserved_cpus', 'int', (r) => r.reservedCpus],
  ['reserved_memory_mib', 'int', (r) => r.reservedMemoryMib],
  ['reserved_disk_mib', 'int', (r) => r.reservedDiskMib],
  ['resource_sources', 'jsonb', (r) => r.resourceSources],
];

/** The columns of a row's tag sets (the user's and the frozen ones), which the rows of one analysis share. */
const TAG_SET_COLUMNS: readonly Column[] = [
  ['user_provided_tags', 'text[]', (r) => r.userProvidedTags],
  ['user_required_tags', 'text[]', (r) => r.userRequiredTags],
  ['provided_tags', 'text[]', (r) => r.providedTags],
  ['required_tags', 'text[]', (r) => r.requiredTags],
  ['provided_entries', 'jsonb', (r) => r.providedEntries],
  ['required_entries', 'jsonb', (r) => r.requiredEntries],
  ['dropped_tags', 'jsonb', (r) => r.droppedTags],
];

/** Element `i` of the JSON array `json` as a value of the column's type. */
function element(json: string, i: number, type: Column[1]): string {
  if (type === 'jsonb') return `nullif(${json}->${i}, 'null'::jsonb)`; // a JSON null is SQL's
  if (type === 'text[]') return `array(select jsonb_array_elements_text(${json}->${i}))`;
  return `(${json}->>${i})::${type}`;
}

/**
 * The insert of {@link insertRows}: each row a JSON array of its own columns, then the numbers of its
 * tag set and task data in theirs (`with ordinality` numbers from 1, in order).
 */
const INSERT_ROWS_SQL = `insert into work_request (${[...OWN_COLUMNS, ...TAG_SET_COLUMNS].map((c) => c[0]).join(', ')}, task_data)
  select ${OWN_COLUMNS.map((c, i) => element('r.v', i, c[1])).join(', ')}, ${TAG_SET_COLUMNS.map((c) => `s.${c[0]}`).join(', ')}, d.v
    from jsonb_array_elements(?::jsonb) with ordinality as r(v, n)
    join (select n, ${TAG_SET_COLUMNS.map((c, i) => `${element('v', i, c[1])} as ${c[0]}`).join(', ')}
            from jsonb_array_elements(?::jsonb) with ordinality as s(v, n)) as s on s.n = (r.v->>${OWN_COLUMNS.length})::int
    join jsonb_array_elements(?::jsonb) with ordinality as d(v, n) on d.n = (r.v->>${OWN_COLUMNS.length + 1})::int
   order by r.n
  returning id, task_data`;

/**
 * Inserts new work requests in one statement, in order, and returns their ids and their task data as
 * stored (jsonb writes an object's keys in its own order). What rows share is sent once: their tag
 * sets (the same for the requests of one analysis) and their task data; each row sends its own
 * columns and the numbers of those.
 */
async function insertRows(
  tx: EntityManager,
  rows: readonly NewRow[],
): Promise<{ id: number; taskData: WorkRequest['taskData'] }[]> {
  const tagSets = new Distinct();
  const data = new Distinct();
  // The rows of one analysis hold the same frozen lists (the same arrays): their tag set is written
  // once, found by those arrays and the user's own tags.
  const listNumbers = new Map<unknown, number>();
  const listNumber = (list: unknown) => {
    let n = listNumbers.get(list);
    if (n === undefined) listNumbers.set(list, (n = listNumbers.size));
    return n;
  };
  const seen = new Map<string, number>();
  const own = rows.map((r) => {
    const lists = `${JSON.stringify([r.userProvidedTags, r.userRequiredTags])}${listNumber(r.providedTags)},${listNumber(r.requiredTags)},${listNumber(r.providedEntries)},${listNumber(r.requiredEntries)},${listNumber(r.droppedTags)}`;
    let tagSet = seen.get(lists);
    if (tagSet === undefined)
      seen.set(lists, (tagSet = tagSets.number(JSON.stringify(TAG_SET_COLUMNS.map((c) => c[2](r))))));
    const values = OWN_COLUMNS.map((c) => c[2](r));
    values.push(tagSet, data.number(JSON.stringify(r.taskData)));
    return values;
  });
  const stored = await executeBound<{ id: number; task_data: WorkRequest['taskData'] }>(tx, INSERT_ROWS_SQL, [
    JSON.stringify(own),
    tagSets.json(),
    data.json(),
  ]);
  if (stored.length !== rows.length)
    throw new Error(`inserted ${rows.length} work requests, got ${stored.length} rows back`);
  // Ids are drawn in the order of the rows inserted, which is the input's (order by).
  return stored.map((s) => ({ id: Number(s.id), taskData: s.task_data })).sort((a, b) => a.id - b.id);
}

/**
 * A work request as {@link insertRows} wrote it (nothing changes a new row: no trigger writes it),
 * as a plain record: the columns it did not write hold their defaults (the migrations' and the
 * entity's), its references are the workspace and user the create read, and its lists are its own.
 * Not an entity: the ORM's bookkeeping of a thousand entities (their tracked properties, their
 * snapshots) costs a batch more than the rest of its writing. Every property is written out: V8
 * builds an object spread from another and then given more properties at some 25 µs a row.
 */
function writtenRecord(
  r: NewRow,
  stored: { id: number; taskData: WorkRequest['taskData'] },
  workspace: Workspace,
  createdBy: User,
): WorkRequestRecord {
  return {
    id: stored.id,
    workspace,
    createdBy,
    taskType: r.taskType,
    taskName: r.taskName,
    taskData: stored.taskData,
    status: r.status,
    result: null,
    statusReason: r.statusReason,
    exitCode: null,
    priorityBase: r.priorityBase,
    priorityAdjustment: r.priorityAdjustment,
    fairKey: r.fairKey,
    worker: null,
    parent: null,
    userProvidedTags: r.userProvidedTags.slice(),
    userRequiredTags: r.userRequiredTags.slice(),
    providedTags: r.providedTags.slice(),
    requiredTags: r.requiredTags.slice(),
    providedEntries: r.providedEntries.slice(),
    requiredEntries: r.requiredEntries.slice(),
    droppedTags: r.droppedTags.slice(),
    classId: r.classId,
    expectedClassId: r.expectedClassId,
    userResources: r.userResources,
    reservedCpus: r.reservedCpus,
    reservedMemoryMib: r.reservedMemoryMib,
    reservedDiskMib: r.reservedDiskMib,
    resourceSources: r.resourceSources,
    retryCount: 0,
    quarantineProbe: false,
    createdAt: r.createdAt,
    pendingAt: r.pendingAt,
    assignedAt: null,
    startedAt: null,
    completedAt: r.completedAt,
    estimatedStartAt: null,
  };
}

/** A batch lists at most this many problems: a thousand bad requests must not make a megabyte of answer. */
const MAX_LISTED_PROBLEMS = 100;

/**
 * The dependencies of `prepared` that `viewer` may see, by id (read afresh, and with `lock` FOR SHARE);
 * an InputError naming every one that is unknown to the viewer or was aborted.
 */
async function visibleDependencies(
  em: EntityManager,
  viewer: Viewer,
  prepared: readonly PreparedCreate[],
  dependencyIds: readonly number[],
  lock: boolean,
): Promise<Map<number, WorkRequest>> {
  const found = dependencyIds.length
    ? await em.find(
        WorkRequestSchema,
        { id: { $in: [...dependencyIds] } },
        { ...(lock ? { lockMode: LockMode.PESSIMISTIC_READ } : {}), populate: ['workspace'], refresh: true },
      )
    : [];
  const visible = new Map<number, WorkRequest>();
  for (const dep of found) if (await viewerSeesWorkRequest(em, viewer, dep)) visible.set(dep.id, dep);
  const problems: InputProblem[] = [];
  for (const p of prepared) {
    for (const id of p.dependencyIds) {
      const dep = visible.get(id);
      const path = `${p.path}.dependsOn`;
      if (!dep)
        problems.push({
          code: ERROR_CODES.UNKNOWN_DEPENDENCY,
          message: `${path}: no work request ${id}`,
          path,
          tag: null,
        });
      else if (dep.status === 'ABORTED')
        problems.push({
          code: ERROR_CODES.UNKNOWN_DEPENDENCY,
          message: `${path}: work request ${id} was aborted and will never complete`,
          path,
          tag: null,
        });
    }
  }
  if (problems.length) throw InputError.of(problems);
  return visible;
}

/**
 * Writes prepared requests in one transaction, all or none: the dependencies are locked and checked
 * (every problem named), the tag sets of those with nothing to wait for frozen and their classes
 * found in one call, the rows and their dependencies inserted in one statement each, and what the
 * server runs itself run (orchestration.ts). Returns the requests in input order, each as `answer`
 * makes it from what was written (a plain record, or the entity of one the server ran), and what
 * else changed.
 */
async function writeCreates<T>(
  deps: WorkRequestDeps,
  prepared: readonly PreparedCreate[],
  answer: (tx: EntityManager, written: WorkRequestRecord) => T,
  record?: (tx: EntityManager, created: T[]) => Promise<void>,
): Promise<{ created: T[]; changed: RequestChange[] }> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const dependencyIds = [...new Set(prepared.flatMap((p) => p.dependencyIds))];
  const now = new Date();
  // Each request's place among workspaces at equal priority (fair share), one clock update per
  // workspace; outside a caller's transaction, committed before ours (fair-keys.ts says why).
  const workspaceIds = prepared.map((p) => p.workspace.id);
  const apart = !em.isInTransaction();
  // Refused dependencies are refused before the keys are taken, so that a refused create writes nothing
  // (a look on a fork of its own; the transaction looks again, locking them).
  if (apart && dependencyIds.length) await visibleDependencies(em.fork(), viewer, prepared, dependencyIds, false);
  const reserved = apart ? await fairKeysFor(em, workspaceIds, now) : null;
  return em.transactional(async (tx) => {
    // FOR SHARE: a dependency cannot complete between this check and our commit, so none is missed.
    const visible = await visibleDependencies(tx, viewer, prepared, dependencyIds, true);

    // The rows, in input order; those with nothing to wait for PENDING now, with the tags just
    // computed (nothing changed in between), their classes found in one call.
    const rows = prepared.map((p) => {
      const row: NewRow = {
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
        status: 'BLOCKED',
        pendingAt: null,
        completedAt: null,
        statusReason: null,
        providedTags: [],
        requiredTags: [],
        providedEntries: [],
        requiredEntries: [],
        droppedTags: [],
        classId: null,
        expectedClassId: null,
        fairKey: 0, // set below
        userResources: p.userResources,
        reservedCpus: 0,
        reservedMemoryMib: 0,
        reservedDiskMib: 0,
        resourceSources: null,
      };
      const waits = p.dependencyIds.some((id) => visible.get(id)!.status !== 'COMPLETED');
      if (!waits) freezeAnalysis(row, p.analysis, now);
      return row;
    });
    const fairKeys = reserved ?? (await fairKeysFor(tx, workspaceIds, now));
    rows.forEach((r, i) => (r.fairKey = fairKeys[i]));
    const ready = rows.filter((r) => r.status === 'PENDING');
    const classIds = await classIdsFor(tx, ready);
    ready.forEach((r, i) => (r.classId = classIds[i]));
    // A request that waits keeps the class its tags have now, for demand's coming work (scheduler/rules/look-ahead.ts).
    const waiting = rows.flatMap((r, i) => {
      const a = prepared[i].analysis;
      return r.status === 'BLOCKED' && a.ok && !isOrchestrated(r.taskType)
        ? [{ r, tags: { providedTags: a.providedTags, requiredTags: a.requiredTags } }]
        : [];
    });
    const expected = await classIdsFor(
      tx,
      waiting.map((w) => w.tags),
    );
    waiting.forEach((w, i) => (w.r.expectedClassId = expected[i]));
    const inserted = await insertRows(tx, rows);
    const ids = inserted.map((r) => r.id);
    const links = prepared.flatMap((p, i) => p.dependencyIds.map((dep) => [ids[i], dep] as const));
    if (links.length) {
      await tx.execute(
        `insert into work_request_dependency (work_request_id, depends_on_id) select * from unnest(?::int[], ?::int[])`,
        [intArray(links.map((l) => l[0])), intArray(links.map((l) => l[1]))],
      );
    }
    // The requests as written, not read back; those the server runs itself are loaded, as entities,
    // since what it runs changes them.
    const written = rows.map((r, i) => writtenRecord(r, inserted[i], prepared[i].workspace, user));
    const orchestratedIds = written
      .filter((wr) => wr.status === 'PENDING' && isOrchestrated(wr.taskType))
      .map((wr) => wr.id);
    const orchestrated = orchestratedIds.length
      ? await tx.find(
          WorkRequestSchema,
          { id: { $in: orchestratedIds } },
          { populate: ['workspace.scope', 'createdBy'], orderBy: { id: 'asc' } },
        )
      : [];
    if (orchestrated.length) {
      const position = new Map(ids.map((id, i) => [id, i]));
      for (const wr of orchestrated) written[position.get(wr.id)!] = wr;
    }
    // What the server runs itself (orchestration.ts) runs now.
    const changed: RequestChange[] = [];
    const finished = written.filter((wr) => wr.status === 'ABORTED').map((wr) => wr.id);
    for (const wr of orchestrated) {
      const outcome = await runOrchestrated(tx, config, wr);
      changed.push(...outcome.changed);
      finished.push(...outcome.finished);
    }
    await tx.flush();
    if (finished.length) changed.push(...(await settleDependents(tx, config, finished)));
    const created = written.map((wr) => answer(tx, wr));
    await record?.(tx, created); // an idempotency key commits with the requests (services/work/idempotency.ts)
    return { created, changed };
  });
}

/**
 * Creates a work request. Everything is checked before anything is written (prepareCreate), then
 * the dependencies. With all dependencies completed it becomes PENDING at once, its tag sets
 * computed and frozen, and is placed on a free worker if there is one; otherwise it waits BLOCKED.
 */
export async function createWorkRequest(
  deps: WorkRequestDeps,
  input: CreateWorkRequestInput,
  options: { record?: RecordCreated<WorkRequest> } = {},
): Promise<WorkRequest> {
  const lookups = newLookups(deps.em);
  const prepared = await prepareCreate(deps, lookups, input, 'input');
  const record = options.record;
  // Its answer is an entity, as every request the API answers with but a batch's (createWorkRequests).
  const asEntity = (tx: EntityManager, written: WorkRequestRecord): WorkRequest =>
    Utils.isEntity<WorkRequest>(written)
      ? written
      : tx.getEntityFactory().create(WorkRequestSchema, written, { initialized: true, newEntity: false, merge: false });
  const {
    created: [wr],
    changed,
  } = await writeCreates(deps, [prepared], asEntity, record && ((tx, created) => record(tx, created[0])));
  // Placed before its change is published: a request placed at once is published once, by its
  // placement, as ASSIGNED, and that asks no pass of any process (changeMayAllowAssignments).
  const placement =
    wr.status === 'PENDING' && wr.classId != null
      ? (
          await deps.scheduler.placeNew({
            id: wr.id,
            classId: wr.classId,
            taskType: wr.taskType,
            taskName: wr.taskName,
          })
        ).find((a) => a.workRequestId === wr.id)
      : undefined;
  if (!placement)
    deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: prepared.workspace.id, status: wr.status });
  for (const change of changed) deps.events.publish('workRequestChanged', change); // a workflow's children
  // Placed: the answer is the row as its assignment left it (ASSIGNED), as an entity of deps.em.
  return placement ? deps.em.map(WorkRequestSchema, placement.row) : wr;
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
 * (triggered by their events) places them in bulk. Answers with the requests as written: plain
 * records (entities for those the server ran itself), not entities of an EntityManager.
 */
export async function createWorkRequests(
  deps: WorkRequestDeps,
  inputs: readonly CreateWorkRequestInput[],
  options: { record?: RecordCreated<WorkRequestRecord[]> } = {},
): Promise<WorkRequestRecord[]> {
  requireUser(deps.viewer);
  const most = deps.config.input.maxBatchRequests;
  if (inputs.length === 0)
    throw new InputError(ERROR_CODES.INVALID_INPUT, 'input.requests: give at least one request', 'input.requests');
  if (inputs.length > most) {
    throw new InputError(
      ERROR_CODES.INVALID_INPUT,
      `input.requests: at most ${most} requests are accepted in one call (TAGSCHED_MAX_BATCH_REQUESTS), got ${inputs.length}`,
      'input.requests',
    );
  }
  const lookups = newLookups(deps.em);
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
  const { created, changed } = await writeCreates(deps, prepared, (_tx, written) => written, options.record);
  for (const [i, wr] of created.entries())
    deps.events.publish('workRequestChanged', { id: wr.id, workspaceId: prepared[i].workspace.id, status: wr.status });
  for (const change of changed) deps.events.publish('workRequestChanged', change);
  return created;
}
