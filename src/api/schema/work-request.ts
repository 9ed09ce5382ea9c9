import { wrap } from '@mikro-orm/core';
import { GraphQLError } from 'graphql';
import { builder } from '../builder.js';
import { describedValues } from './enum-values.js';
import {
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import { WORK_REQUEST_STATUSES } from '../../core/work-request-status.js';
import {
  WORK_REQUEST_RESULTS,
  WorkRequestSchema,
  type WorkRequest,
  type WorkRequestRecord,
} from '../../storage/entities/work-request.js';
import type { Context } from '../context.js';
import { createWorkRequest, createWorkRequests } from '../../services/work/create-work-requests.js';
import {
  abortWorkRequest,
  addWorkRequestDependencies,
  findVisibleWorkRequest,
} from '../../services/work/work-requests.js';
import { splitWorkspaceName } from '../../services/input/validate.js';
import { idempotent } from '../../services/work/idempotency.js';
import { viewerSeesWorkRequest } from '../../services/identity/visibility.js';
import {
  childrenOf,
  dependenciesOf,
  lastQuarantineProbes,
  listWorkRequests,
  visibleWorkRequests,
} from '../../services/work/work-request-reads.js';
import { IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';
import { decodeCursor, encodeCursor, pageSize, toConnection } from './pagination.js';
import { PAGE } from '../limits/page.js';
import { ResourceRequestRef, ResourcesInput, ResourcesPartialRef, ResourcesRef } from './resources.js';
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

/** A work request. */
export const WorkRequestRef = builder.objectRef<WorkRequestRecord>('WorkRequest');
WorkRequestRef.implement({
  description:
    'A task to run, with the tags that decide which worker may run it. Seen by the members of its workspace (everyone for a public one), admins and its worker',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Its id' }),
    taskType: t.exposeString('taskType', { description: 'worker, server, signing, internal or workflow' }),
    taskName: t.exposeString('taskName', { description: 'The task, e.g. sbuild, autopkgtest, noop' }),
    taskData: t.field({ type: 'JSON', description: "The task's parameters, as submitted", resolve: (w) => w.taskData }),
    status: t.field({ type: StatusEnum, description: 'Where it is in its life', resolve: (w) => w.status }),
    result: t.field({
      type: ResultEnum,
      nullable: true,
      description: 'How it ended; null until COMPLETED',
      resolve: (w) => w.result ?? null,
    }),
    statusReason: t.exposeString('statusReason', { nullable: true, description: 'Why it was aborted or re-queued' }),
    priority: t.int({
      description: 'Effective priority: base + adjustment',
      resolve: (w) => w.priorityBase + w.priorityAdjustment,
    }),
    priorityBase: t.exposeInt('priorityBase', { description: 'The priority it was submitted with; higher runs first' }),
    priorityAdjustment: t.exposeInt('priorityAdjustment', {
      description: 'Added to priorityBase (only admins raise it)',
    }),
    workspace: t.field({
      type: WorkspaceRef,
      description: 'The workspace it belongs to',
      resolve: (w) => w.workspace.id,
    }),
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
      load: async (ids: number[], ctx) =>
        (await dependenciesOf(ctx.em, ctx.viewer, ids)).map((d) => d.visible.map(String)),
      resolve: (w) => w.id,
    }),
    hiddenDependencyCount: t.loadable({
      type: 'Int',
      description: 'The requests it depends on that the viewer may not see, counted only',
      load: async (ids: number[], ctx) => (await dependenciesOf(ctx.em, ctx.viewer, ids)).map((d) => d.hidden),
      resolve: (w) => w.id,
    }),
    providedTags: t.field({
      type: [TagEntryRef],
      description: 'Frozen when the request became PENDING',
      resolve: (w) => w.providedEntries,
    }),
    requiredTags: t.field({
      type: [TagEntryRef],
      description: 'Frozen when the request became PENDING',
      resolve: (w) => w.requiredEntries,
    }),
    droppedTags: t.field({
      type: [TagRefusalRef],
      description: 'Rule tags refused for their provenance',
      resolve: (w) => w.droppedTags,
    }),
    resources: t.field({
      type: ResourceRequestRef,
      nullable: true,
      description:
        'What it reserves of a worker that shares its resources, with where each figure came from; frozen with its tags, null before',
      resolve: (w) =>
        w.resourceSources
          ? {
              resources: { cpus: w.reservedCpus, memoryMib: w.reservedMemoryMib, diskMib: w.reservedDiskMib },
              sources: w.resourceSources,
            }
          : null,
    }),
    runLimits: t.field({
      type: ResourcesRef,
      nullable: true,
      description:
        'What its run may use on the worker it is assigned to, when that worker shares its resources: its reservation, which the agent applies (TAGSCHED_PARALLEL from the CPUs, the cgroup memory limit); null on a worker with fixed slots or before it is assigned',
      resolve: async (w, _a, ctx) =>
        w.worker && w.resourceSources && (await ctx.loaders.sharesResources.load(w.worker.id))
          ? { cpus: w.reservedCpus, memoryMib: w.reservedMemoryMib, diskMib: w.reservedDiskMib }
          : null,
    }),
    userResources: t.field({
      type: ResourcesPartialRef,
      nullable: true,
      description: 'The resources asked for at submission, as given; null when none were',
      resolve: (w) => w.userResources ?? null,
    }),
    userProvidedTags: t.exposeStringList('userProvidedTags', { description: 'As submitted' }),
    userRequiredTags: t.exposeStringList('userRequiredTags', { description: 'As submitted' }),
    retryCount: t.exposeInt('retryCount', { description: 'How many times it was re-queued after its worker was lost' }),
    quarantineProbe: t.exposeBoolean('quarantineProbe', {
      description:
        'True for a quarantine probe: a noop the server gave a quarantined worker, for it alone, to see whether it runs work again (its SUCCESS lifts the quarantine; see TAGSCHED_QUARANTINE_PROBE_SECONDS)',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was submitted' }),
    pendingAt: t.expose('pendingAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it last became PENDING (a re-queued request is pending again from then)',
    }),
    assignedAt: t.expose('assignedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it was last assigned; null: not yet',
    }),
    startedAt: t.expose('startedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When its worker last started it; null: not yet',
    }),
    completedAt: t.expose('completedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it completed or was aborted; null while it is not over',
    }),
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

builder.objectFields(WorkerRef, (t) => ({
  lastQuarantineProbe: t.loadable({
    type: WorkRequestRef,
    nullable: true,
    description:
      'The last quarantine probe the server gave this worker (when, and how it ended: assignedAt, status, result, statusReason); null if it never had one or the viewer may not see it',
    load: async (workerIds: number[], ctx) => {
      const found = await lastQuarantineProbes(ctx.em, ctx.viewer, workerIds);
      return workerIds.map((w) => found.get(w) ?? null);
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
      const found = await visibleWorkRequests(ctx.em, ctx.viewer, ids);
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
      // Each workflow's first size + 1 children after the cursor: the extra one says there is a next page.
      const children = await childrenOf(ctx.em, ctx.viewer, ids, { after, size: size + 1 });
      return ids.map((id) => toConnection(children.get(id) ?? [], size, (c) => encodeCursor(c.id), args.after != null));
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
      const filter = f && { ...f, workspace: f.workspace ? workspaceFilter(f.workspace) : null };
      const rows = await listWorkRequests(ctx.em, ctx.viewer, filter, { before: after, limit: size + 1 });
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
    taskData: t.field({
      type: 'JSON',
      required: true,
      description: "The task's parameters, checked against its schema (e.g. {} for noop)",
    }),
    providedTags: t.stringList({ description: 'Only under prefixes the workspace grants to its members' }),
    requiredTags: t.stringList({ description: 'Tags its worker must provide, beyond those the task and rules add' }),
    priorityBase: t.int({ description: 'Higher runs first, -1000000 to 1000000 (default 0)' }),
    priorityAdjustment: t.int({ description: 'A positive adjustment needs admin' }),
    dependsOn: t.idList({ description: 'BLOCKED until all of these are COMPLETED' }),
    resources: t.field({
      type: ResourcesInput,
      description:
        'What it reserves of a worker that shares its resources; before the workspace’s and site’s rules, the statistics and the task’s default',
    }),
  }),
});

const CreateWorkRequestsInput = builder.inputType('CreateWorkRequestsInput', {
  description: 'Several work requests to submit at once',
  fields: (t) => ({
    requests: t.field({
      type: [CreateWorkRequestInput],
      required: true,
      description:
        'Each checked as createWorkRequest checks one; at most TAGSCHED_MAX_BATCH_REQUESTS (1,000 by default)',
    }),
  }),
});

const CreateWorkRequestsPayload = builder.objectRef<WorkRequestRecord[]>('CreateWorkRequestsPayload').implement({
  description: 'The requests a createWorkRequests call created',
  fields: (t) => ({
    requests: t.field({
      type: [WorkRequestRef],
      description: 'In the order of the input',
      resolve: (created) => created,
    }),
  }),
});

/**
 * The workspace (with its scope) and the creator of a request this operation has just read, handed
 * to the answer's loaders so that `workspace { name }` and `createdBy { username }` are not read
 * again. Only what is loaded is handed over: a reference still to be read goes through the loader.
 */
function primeOwners(ctx: Context, wr: WorkRequest): WorkRequest {
  const ws = wr.workspace;
  if (wrap(ws).isInitialized() && wrap(ws.scope).isInitialized())
    ctx.loaders.byId<Workspace>(WorkspaceSchema, ['scope']).prime(ws.id, ws);
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
        { em: ctx.em, viewer: ctx.viewer, secrets: ctx.secrets, ttlMs: ctx.config.input.idempotencyKeyTtlMs },
        'createWorkRequests',
        idempotencyKey,
        requests,
        {
          idOf: (created) => created.map((wr) => wr.id),
          replay: async (em, _id, _secret, ids) => {
            const found = new Map(
              (await em.find(WorkRequestSchema, { id: { $in: [...ids] } }, { populate: ['workspace'] })).map((wr) => [
                wr.id,
                wr,
              ]),
            );
            return ids.flatMap((id) => found.get(id) ?? []);
          },
          mayRead: async (em, viewer, created) =>
            (await Promise.all(created.map((wr) => viewerSeesWorkRequest(em, viewer, wr)))).every(Boolean),
        },
        (record) => createWorkRequests(ctx, requests, { record }),
      );
    },
  }),
  createWorkRequest: t.field({
    type: WorkRequestRef,
    description:
      'Owners and contributors of the workspace (and admins): submits work; it is PENDING (or BLOCKED on its dependencies) and its tags are fixed now',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({ type: CreateWorkRequestInput, required: true, description: 'The work to submit' }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_r, { input, idempotencyKey }, ctx) => {
      const request = { ...input, dependsOn: input.dependsOn?.map(String) };
      return idempotent<WorkRequest>(
        { em: ctx.em, viewer: ctx.viewer, secrets: ctx.secrets, ttlMs: ctx.config.input.idempotencyKeyTtlMs },
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
    description:
      'Its creator, the workspace owners and admins: stops work that is not over (ABORTED); its dependents are aborted too',
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
