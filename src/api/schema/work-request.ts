import { wrap, type FilterQuery } from '@mikro-orm/core';
import { GraphQLError } from 'graphql';
import { builder } from '../builder.js';
import { describedValues } from './enum-values.js';
import { ForbiddenError, InputError, InvalidStateError, NotFoundError, UnauthenticatedError } from '../../core/errors.js';
import { ACTIVE_STATUSES, WORK_REQUEST_RESULTS, WORK_REQUEST_STATUSES, WorkRequestSchema, type WorkRequest, type WorkRequestRecord } from '../../storage/entities/work-request.js';
import type { Context } from '../context.js';
import { intArray } from '../../storage/db/arrays.js';
import { asFilter } from '../../storage/db/condition.js';
import { createWorkRequest, createWorkRequests } from '../../services/work/create-work-requests.js';
import { abortWorkRequest, addWorkRequestDependencies, findVisibleWorkRequest } from '../../services/work/work-requests.js';
import { splitWorkspaceName } from '../../services/input/validate.js';
import { idempotent } from '../../services/work/idempotency.js';
import { principalOf, viewerSeesWorkRequest, workRequestSql } from '../../services/identity/visibility.js';
import { IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';
import { decodeCursor, encodeCursor, pageSize, toConnection } from './pagination.js';
import { PAGE } from '../limits/page.js';
import { TagEntryRef, TagRefusalRef } from './tag-entry.js';
import { WorkerRef } from './worker.js';
import { UserRef, WorkspaceRef } from './workspace.js';
import { UserSchema, type User } from '../../storage/entities/user.js';
import { WorkspaceSchema, type Workspace } from '../../storage/entities/workspace.js';

const StatusEnum = builder.enumType('WorkRequestStatus', {
  description: 'Where a work request is in its life: BLOCKED → PENDING → ASSIGNED → RUNNING → COMPLETED, or ABORTED',
  values: describedValues<(typeof WORK_REQUEST_STATUSES)[number]>({
    BLOCKED: 'Waits for its dependencies to complete',
    PENDING: 'Queued: waits for a worker that matches (see its diagnosis)',
    ASSIGNED: 'Given to a worker that has not started it yet',
    RUNNING: 'Its worker started it',
    COMPLETED: 'Finished: `result` says how',
    ABORTED: 'Stopped before completion (by a user or admin, or after too many retries): `statusReason` says why',
  }),
});
export const ResultEnum = builder.enumType('WorkRequestResult', {
  description: 'How a completed work request ended',
  values: describedValues<(typeof WORK_REQUEST_RESULTS)[number]>({
    SUCCESS: 'The task succeeded',
    FAILURE: 'The task ran and failed (e.g. the package does not build)',
    ERROR: 'The task could not run (e.g. a broken environment or handler)',
    SKIPPED: 'The task had nothing to do',
  }),
});

/** The dependencies of each request, those the viewer may see by id and the others as a count (one statement). */
async function dependenciesOf(ctx: Context, ids: number[]): Promise<{ visible: number[]; hidden: number }[]> {
  const visible = workRequestSql(principalOf(ctx.viewer), 'dep');
  const rows = await ctx.em.execute<{ work_request_id: number; depends_on_id: number; visible: boolean }[]>(
    `select d.work_request_id, d.depends_on_id, ${visible.sql} as visible
       from work_request_dependency d join work_request dep on dep.id = d.depends_on_id
      where d.work_request_id = any(?::int[]) order by d.depends_on_id`,
    [...visible.params, intArray(ids)],
  );
  return ids.map((id) => {
    const mine = rows.filter((r) => r.work_request_id === id);
    return { visible: mine.filter((r) => r.visible).map((r) => r.depends_on_id), hidden: mine.filter((r) => !r.visible).length };
  });
}

/** A work request. */
export const WorkRequestRef = builder.objectRef<WorkRequestRecord>('WorkRequest');
WorkRequestRef.implement({
  description: 'A task to run, with the tags that decide which worker may run it. Seen by the members of its workspace (everyone for a public one), admins and its worker',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Its id' }),
    taskType: t.exposeString('taskType', { description: 'worker, server, signing, internal or workflow' }),
    taskName: t.exposeString('taskName', { description: 'The task, e.g. sbuild, autopkgtest, noop' }),
    taskData: t.field({ type: 'JSON', description: "The task's parameters, as submitted", resolve: (w) => w.taskData }),
    status: t.field({ type: StatusEnum, description: 'Where it is in its life', resolve: (w) => w.status }),
    result: t.field({ type: ResultEnum, nullable: true, description: 'How it ended; null until COMPLETED', resolve: (w) => w.result ?? null }),
    statusReason: t.exposeString('statusReason', { nullable: true, description: 'Why it was aborted or re-queued' }),
    priority: t.int({ description: 'Effective priority: base + adjustment', resolve: (w) => w.priorityBase + w.priorityAdjustment }),
    priorityBase: t.exposeInt('priorityBase', { description: 'The priority it was submitted with; higher runs first' }),
    priorityAdjustment: t.exposeInt('priorityAdjustment', { description: 'Added to priorityBase (only admins raise it)' }),
    workspace: t.field({ type: WorkspaceRef, description: 'The workspace it belongs to', resolve: (w) => w.workspace.id }),
    createdBy: t.field({ type: UserRef, description: 'The user who submitted it', resolve: (w) => w.createdBy.id }),
    worker: t.field({
      type: WorkerRef,
      nullable: true,
      description: 'The worker it is (or was last) assigned to; null before its first assignment',
      resolve: (w) => w.worker?.id ?? null,
    }),
    dependsOn: t.loadableList({
      type: 'ID',
      description: 'The requests it depends on that the viewer may see',
      load: async (ids: number[], ctx) => (await dependenciesOf(ctx, ids)).map((d) => d.visible.map(String)),
      resolve: (w) => w.id,
    }),
    hiddenDependencyCount: t.loadable({
      type: 'Int',
      description: 'The requests it depends on that the viewer may not see, counted only',
      load: async (ids: number[], ctx) => (await dependenciesOf(ctx, ids)).map((d) => d.hidden),
      resolve: (w) => w.id,
    }),
    providedTags: t.field({ type: [TagEntryRef], description: 'Frozen when the request became PENDING', resolve: (w) => w.providedEntries }),
    requiredTags: t.field({ type: [TagEntryRef], description: 'Frozen when the request became PENDING', resolve: (w) => w.requiredEntries }),
    droppedTags: t.field({ type: [TagRefusalRef], description: 'Rule tags refused for their provenance', resolve: (w) => w.droppedTags }),
    userProvidedTags: t.exposeStringList('userProvidedTags', { description: 'As submitted' }),
    userRequiredTags: t.exposeStringList('userRequiredTags', { description: 'As submitted' }),
    retryCount: t.exposeInt('retryCount', { description: 'How many times it was re-queued after its worker was lost' }),
    quarantineProbe: t.exposeBoolean('quarantineProbe', {
      description:
        'True for a quarantine probe: a noop the server gave a quarantined worker, for it alone, to see whether it runs work again (its SUCCESS lifts the quarantine; see TAGSCHED_QUARANTINE_PROBE_SECONDS)',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was submitted' }),
    pendingAt: t.expose('pendingAt', { type: 'DateTime', nullable: true, description: 'When it last became PENDING (a re-queued request is pending again from then)' }),
    assignedAt: t.expose('assignedAt', { type: 'DateTime', nullable: true, description: 'When it was last assigned; null: not yet' }),
    startedAt: t.expose('startedAt', { type: 'DateTime', nullable: true, description: 'When its worker last started it; null: not yet' }),
    completedAt: t.expose('completedAt', { type: 'DateTime', nullable: true, description: 'When it completed or was aborted; null while it is not over' }),
  }),
});

const WorkRequestFilter = builder.inputType('WorkRequestFilter', {
  description: 'Which work requests to list; every field given must hold',
  fields: (t) => ({
    status: t.field({ type: [StatusEnum], description: 'Only requests in one of these states' }),
    workspace: t.string({ description: 'scope/name' }),
    taskName: t.string({ description: 'Only requests of this task, e.g. sbuild' }),
    requiresTag: t.string({ description: 'Only requests whose frozen required set has this exact tag' }),
    providesTag: t.string({ description: 'Only requests whose frozen provided set has this exact tag' }),
    worker: t.string({ description: 'Only requests assigned to this worker' }),
  }),
});

/** The `scope/name` of a filter; a query has no result union, so a malformed one is a GraphQL error the client can read, like a bad cursor. */
/**
 * Requests holding a tag, written as two arms so that each has an index: the partial GIN index of the
 * tag side for requests not ASSIGNED or RUNNING (TAG_INDEXED_SQL), and the few active ones apart.
 */
function tagFilter(field: 'requiredTags' | 'providedTags', tag: string): FilterQuery<WorkRequest> {
  return {
    $or: [
      { status: { $nin: [...ACTIVE_STATUSES] }, [field]: { $contains: [tag] } },
      { status: { $in: [...ACTIVE_STATUSES] }, [field]: { $contains: [tag] } },
    ],
  };
}

function workspaceFilter(full: string): { scope: string; name: string } {
  try {
    return splitWorkspaceName(full, 'filter.workspace');
  } catch (err) {
    if (err instanceof InputError) throw new GraphQLError(err.message, { extensions: { code: err.code } });
    throw err;
  }
}

const WorkRequestConnection = builder.connectionObject(
  { type: WorkRequestRef, name: 'WorkRequestConnection', description: 'A page of work requests the viewer may see' },
  { description: 'A work request of the page' },
);

/** The rows of these ids the viewer may see, by id (one statement). */
async function visibleById(ctx: Context, ids: readonly number[]): Promise<Map<number, WorkRequest>> {
  const and: FilterQuery<WorkRequest>[] = [{ id: { $in: [...ids] } }, asFilter((alias) => workRequestSql(principalOf(ctx.viewer), alias))];
  const rows = await ctx.em.find(WorkRequestSchema, { $and: and });
  return new Map(rows.map((r) => [r.id, r]));
}

builder.objectFields(WorkerRef, (t) => ({
  lastQuarantineProbe: t.loadable({
    type: WorkRequestRef,
    nullable: true,
    description:
      'The last quarantine probe the server gave this worker (when, and how it ended: assignedAt, status, result, statusReason); null if it never had one or the viewer may not see it',
    load: async (workerIds: number[], ctx) => {
      const last = await ctx.em.execute<{ worker_id: number; id: number }[]>(
        `select distinct on (worker_id) worker_id, id from work_request where quarantine_probe and worker_id = any(?::int[]) order by worker_id, id desc`,
        [intArray(workerIds)],
      );
      const found = last.length
        ? await visibleById(
            ctx,
            last.map((r) => r.id),
          )
        : new Map<number, WorkRequest>();
      return workerIds.map((w) => found.get(last.find((r) => r.worker_id === w)?.id ?? 0) ?? null);
    },
    resolve: (w) => w.id,
  }),
}));

builder.objectFields(WorkRequestRef, (t) => ({
  parent: t.loadable({
    type: WorkRequestRef,
    nullable: true,
    description: 'The workflow that created it (null for a request a client submitted)',
    load: async (ids: number[], ctx) => {
      const found = await visibleById(ctx, ids);
      return ids.map((id) => found.get(id) ?? null);
    },
    resolve: (w) => w.parent?.id ?? null,
  }),
  children: t.loadable({
    type: WorkRequestConnection,
    description: 'What a workflow expanded into, in creation order (empty for other requests)',
    byPath: true, // one statement for the children of every workflow at this place of the query, paged alike
    args: {
      first: t.arg.int({ description: `How many children, at most (default ${PAGE.default}, at most ${PAGE.max})` }),
      after: t.arg.string({ description: "The previous page's pageInfo.endCursor" }),
    },
    load: async (ids: number[], ctx, args) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is number => typeof v === 'number') ?? 0;
      const visible = workRequestSql(principalOf(ctx.viewer), 'c');
      // Each workflow's first size + 1 children after the cursor: the extra one says there is a next page.
      const rows = await ctx.em.execute<{ id: number; parent_id: number }[]>(
        `select id, parent_id from (
           select c.id, c.parent_id, row_number() over (partition by c.parent_id order by c.id) as n
             from work_request c where c.parent_id = any(?::int[]) and c.id > ? and ${visible.sql}
         ) page where n <= ? order by id`,
        [intArray(ids), after, ...visible.params, size + 1],
      );
      const found = rows.length
        ? await visibleById(
            ctx,
            rows.map((r) => r.id),
          )
        : new Map<number, WorkRequest>();
      return ids.map((id) =>
        toConnection(
          rows.filter((r) => r.parent_id === id).map((r) => found.get(r.id)!),
          size,
          (c) => encodeCursor(c.id),
          args.after != null,
        ),
      );
    },
    resolve: (w) => w.id,
  }),
}));

builder.queryFields((t) => ({
  workRequests: t.field({
    type: WorkRequestConnection,
    description: 'Newest first; only the work the viewer may see',
    args: {
      filter: t.arg({ type: WorkRequestFilter, description: 'Which requests; omitted: all the viewer may see' }),
      first: t.arg.int({ description: `How many, at most (default ${PAGE.default}, at most ${PAGE.max})` }),
      after: t.arg.string({ description: "The previous page's pageInfo.endCursor" }),
    },
    resolve: async (_root, args, ctx) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is number => typeof v === 'number');
      const f = args.filter;
      const principal = principalOf(ctx.viewer);
      const and: FilterQuery<WorkRequest>[] = [asFilter((alias) => workRequestSql(principal, alias))];
      if (f?.status?.length) and.push({ status: { $in: f.status } });
      if (f?.workspace) {
        const { scope, name } = workspaceFilter(f.workspace);
        and.push({ workspace: { name, scope: { name: scope } } });
      }
      if (f?.taskName) and.push({ taskName: f.taskName });
      if (f?.requiresTag) and.push(tagFilter('requiredTags', f.requiresTag));
      if (f?.providesTag) and.push(tagFilter('providedTags', f.providesTag));
      if (f?.worker) and.push({ worker: { name: f.worker } });
      if (after !== null) and.push({ id: { $lt: after } });
      const rows = await ctx.em.find(WorkRequestSchema, { $and: and }, { orderBy: { id: 'desc' }, limit: size + 1 });
      return toConnection(rows, size, (w) => encodeCursor(w.id), after !== null);
    },
  }),
  workRequest: t.field({
    type: WorkRequestRef,
    nullable: true,
    description: 'A work request by id; null when there is none or the viewer may not see it',
    args: { id: t.arg.id({ required: true, description: 'Its id' }) },
    resolve: async (_root, { id }, ctx) => {
      try {
        return await findVisibleWorkRequest(ctx.em, ctx.viewer, String(id));
      } catch (err) {
        if (err instanceof NotFoundError || err instanceof InputError) return null; // unknown, invisible or malformed id
        throw err;
      }
    },
  }),
}));

const CreateWorkRequestInput = builder.inputType('CreateWorkRequestInput', {
  description: 'Work to submit to a workspace',
  fields: (t) => ({
    workspace: t.string({ required: true, description: 'scope/name' }),
    taskType: t.string({ required: true, description: 'worker, server, signing, internal or workflow' }),
    taskName: t.string({ required: true, description: 'The task, e.g. noop, sbuild, autopkgtest' }),
    taskData: t.field({ type: 'JSON', required: true, description: "The task's parameters, checked against its schema (e.g. {} for noop)" }),
    providedTags: t.stringList({ description: 'Only under prefixes the workspace grants to its members' }),
    requiredTags: t.stringList({ description: 'Tags its worker must provide, beyond those the task and rules add' }),
    priorityBase: t.int({ description: 'Higher runs first, -1000000 to 1000000 (default 0)' }),
    priorityAdjustment: t.int({ description: 'A positive adjustment needs admin' }),
    dependsOn: t.idList({ description: 'BLOCKED until all of these are COMPLETED' }),
  }),
});

const CreateWorkRequestsInput = builder.inputType('CreateWorkRequestsInput', {
  description: 'Several work requests to submit at once',
  fields: (t) => ({
    requests: t.field({
      type: [CreateWorkRequestInput],
      required: true,
      description: 'Each checked as createWorkRequest checks one; at most TAGSCHED_MAX_BATCH_REQUESTS (1,000 by default)',
    }),
  }),
});

const CreateWorkRequestsPayload = builder.objectRef<WorkRequestRecord[]>('CreateWorkRequestsPayload').implement({
  description: 'The requests a createWorkRequests call created',
  fields: (t) => ({
    requests: t.field({ type: [WorkRequestRef], description: 'In the order of the input', resolve: (created) => created }),
  }),
});

/**
 * The workspace (with its scope) and the creator of a request this operation has just read, handed
 * to the answer's loaders so that `workspace { name }` and `createdBy { username }` are not read
 * again. Only what is loaded is handed over: a reference still to be read goes through the loader.
 */
function primeOwners(ctx: Context, wr: WorkRequest): WorkRequest {
  const ws = wr.workspace;
  if (wrap(ws).isInitialized() && wrap(ws.scope).isInitialized()) ctx.loaders.byId<Workspace>(WorkspaceSchema, ['scope']).prime(ws.id, ws);
  if (wrap(wr.createdBy).isInitialized()) ctx.loaders.byId<User>(UserSchema).prime(wr.createdBy.id, wr.createdBy);
  return wr;
}

builder.mutationFields((t) => ({
  createWorkRequests: t.field({
    type: CreateWorkRequestsPayload,
    description:
      'Creates many work requests in one transaction, all or none: a refusal names each request at fault by its index (input.requests[3].taskData…). ' +
      'Requests are placed by the next scheduling pass, not one by one.',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({ type: CreateWorkRequestsInput, required: true, description: 'The work to submit' }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) => {
      const requests = input.requests.map((r) => ({ ...r, dependsOn: r.dependsOn?.map(String) }));
      return idempotent<WorkRequestRecord[]>(
        { em: ctx.em, viewer: ctx.viewer, secrets: ctx.secrets, ttlMs: ctx.config.idempotencyKeyTtlMs },
        'createWorkRequests',
        idempotencyKey,
        requests,
        {
          idOf: (created) => created.map((wr) => wr.id),
          replay: async (em, _id, _secret, ids) => {
            const found = new Map((await em.find(WorkRequestSchema, { id: { $in: [...ids] } }, { populate: ['workspace'] })).map((wr) => [wr.id, wr]));
            return ids.flatMap((id) => found.get(id) ?? []);
          },
          mayRead: async (em, viewer, created) => (await Promise.all(created.map((wr) => viewerSeesWorkRequest(em, viewer, wr)))).every(Boolean),
        },
        (record) => createWorkRequests(ctx, requests, { record }),
      );
    },
  }),
  createWorkRequest: t.field({
    type: WorkRequestRef,
    description: 'Owners and contributors of the workspace (and admins): submits work; it is PENDING (or BLOCKED on its dependencies) and its tags are fixed now',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({ type: CreateWorkRequestInput, required: true, description: 'The work to submit' }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) => {
      const request = { ...input, dependsOn: input.dependsOn?.map(String) };
      return idempotent<WorkRequest>(
        { em: ctx.em, viewer: ctx.viewer, secrets: ctx.secrets, ttlMs: ctx.config.idempotencyKeyTtlMs },
        'createWorkRequest',
        idempotencyKey,
        request,
        {
          idOf: (wr) => wr.id,
          replay: (em, id) => em.findOneOrFail(WorkRequestSchema, { id }, { populate: ['workspace'] }),
          mayRead: (em, viewer, wr) => viewerSeesWorkRequest(em, viewer, wr),
        },
        // The key commits in the request's own transaction; placement and events follow, as without a key.
        (record) => createWorkRequest(ctx, request, { record }),
      ).then((wr) => primeOwners(ctx, wr));
    },
  }),
  abortWorkRequest: t.field({
    type: WorkRequestRef,
    description: 'Its creator, the workspace owners and admins: stops work that is not over (ABORTED); its dependents are aborted too',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('AbortWorkRequestInput', {
          description: 'The work request to abort',
          fields: (f) => ({ id: f.id({ required: true, description: 'The work request' }) }),
        }),
        required: true,
        description: 'The work request to abort',
      }),
    },
    resolve: (_r, { input }, ctx) => abortWorkRequest(ctx, String(input.id)),
  }),
  addWorkRequestDependencies: t.field({
    type: WorkRequestRef,
    description: 'Adds dependencies to a BLOCKED request; cycles are refused',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('AddWorkRequestDependenciesInput', {
          description: 'A BLOCKED work request and the requests it should wait for',
          fields: (f) => ({
            id: f.id({ required: true, description: 'The BLOCKED work request' }),
            dependsOn: f.idList({ required: true, description: 'The work requests it waits for' }),
          }),
        }),
        required: true,
        description: 'The BLOCKED request and its new dependencies',
      }),
    },
    resolve: (_r, { input }, ctx) => addWorkRequestDependencies(ctx, String(input.id), input.dependsOn.map(String)),
  }),
}));
