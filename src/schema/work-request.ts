import type { FilterQuery } from '@mikro-orm/core';
import { GraphQLError } from 'graphql';
import { builder } from '../builder.js';
import { InputError, NotFoundError } from '../errors.js';
import { WORK_REQUEST_RESULTS, WORK_REQUEST_STATUSES, WorkRequestSchema, type WorkRequest } from '../entities/work-request.js';
import { visibleWorkspaceIds } from '../services/directory.js';
import { abortWorkRequest, addWorkRequestDependencies, createWorkRequest, findVisibleWorkRequest } from '../services/work-requests.js';
import { splitWorkspaceName } from '../services/validate.js';
import { COMMON_ERRORS } from './errors.js';
import { decodeCursor, encodeCursor, pageSize, toConnection } from './pagination.js';
import { TagEntryRef, TagRefusalRef } from './tag-entry.js';
import { WorkerRef } from './worker.js';
import { UserRef, WorkspaceRef } from './workspace.js';

const StatusEnum = builder.enumType('WorkRequestStatus', { values: WORK_REQUEST_STATUSES });
export const ResultEnum = builder.enumType('WorkRequestResult', { values: WORK_REQUEST_RESULTS });

/** A work request. */
export const WorkRequestRef = builder.objectRef<WorkRequest>('WorkRequest');
WorkRequestRef.implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    taskType: t.exposeString('taskType'),
    taskName: t.exposeString('taskName'),
    taskData: t.field({ type: 'JSON', resolve: (w) => w.taskData }),
    status: t.field({ type: StatusEnum, resolve: (w) => w.status }),
    result: t.field({ type: ResultEnum, nullable: true, resolve: (w) => w.result ?? null }),
    statusReason: t.exposeString('statusReason', { nullable: true, description: 'Why it was aborted or re-queued' }),
    priority: t.int({ description: 'Effective priority: base + adjustment', resolve: (w) => w.priorityBase + w.priorityAdjustment }),
    priorityBase: t.exposeInt('priorityBase'),
    priorityAdjustment: t.exposeInt('priorityAdjustment'),
    workspace: t.field({ type: WorkspaceRef, resolve: (w) => w.workspace.id }),
    createdBy: t.field({ type: UserRef, resolve: (w) => w.createdBy.id }),
    worker: t.field({ type: WorkerRef, nullable: true, resolve: (w) => w.worker?.id ?? null }),
    dependsOn: t.field({ type: ['ID'], resolve: async (w, _a, ctx) => (await ctx.loaders.dependencyIds.load(w.id)).map(String) }),
    providedTags: t.field({ type: [TagEntryRef], description: 'Frozen when the request became PENDING', resolve: (w) => w.providedEntries }),
    requiredTags: t.field({ type: [TagEntryRef], description: 'Frozen when the request became PENDING', resolve: (w) => w.requiredEntries }),
    droppedTags: t.field({ type: [TagRefusalRef], description: 'Rule tags refused for their provenance', resolve: (w) => w.droppedTags }),
    userProvidedTags: t.exposeStringList('userProvidedTags', { description: 'As submitted' }),
    userRequiredTags: t.exposeStringList('userRequiredTags', { description: 'As submitted' }),
    retryCount: t.exposeInt('retryCount'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    pendingAt: t.expose('pendingAt', { type: 'DateTime', nullable: true }),
    assignedAt: t.expose('assignedAt', { type: 'DateTime', nullable: true }),
    startedAt: t.expose('startedAt', { type: 'DateTime', nullable: true }),
    completedAt: t.expose('completedAt', { type: 'DateTime', nullable: true }),
  }),
});

const WorkRequestFilter = builder.inputType('WorkRequestFilter', {
  fields: (t) => ({
    status: t.field({ type: [StatusEnum] }),
    workspace: t.string({ description: 'scope/name' }),
    taskName: t.string(),
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

const WorkRequestConnection = builder.connectionObject({ type: WorkRequestRef, name: 'WorkRequestConnection' });

builder.queryFields((t) => ({
  workRequests: t.field({
    type: WorkRequestConnection,
    description: 'Newest first; only the work the viewer may see',
    args: { filter: t.arg({ type: WorkRequestFilter }), first: t.arg.int(), after: t.arg.string() },
    resolve: async (_root, args, ctx) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is number => typeof v === 'number');
      const f = args.filter;
      const where: FilterQuery<WorkRequest> = {};
      if (ctx.viewer.kind === 'worker') where.worker = ctx.viewer.worker.id;
      else if (ctx.viewer.kind === 'activation') return toConnection([], size, () => '', false);
      else {
        const visible = await visibleWorkspaceIds(ctx.em, ctx.viewer);
        if (visible !== 'all') where.workspace = { $in: visible };
      }
      const and: FilterQuery<WorkRequest>[] = [where];
      if (f?.status?.length) and.push({ status: { $in: f.status } });
      if (f?.workspace) {
        const { scope, name } = workspaceFilter(f.workspace);
        and.push({ workspace: { name, scope: { name: scope } } });
      }
      if (f?.taskName) and.push({ taskName: f.taskName });
      if (f?.requiresTag) and.push({ requiredTags: { $contains: [f.requiresTag] } });
      if (f?.providesTag) and.push({ providedTags: { $contains: [f.providesTag] } });
      if (f?.worker) and.push({ worker: { name: f.worker } });
      if (after !== null) and.push({ id: { $lt: after } });
      const rows = await ctx.em.find(WorkRequestSchema, { $and: and }, { orderBy: { id: 'desc' }, limit: size + 1 });
      return toConnection(rows, size, (w) => encodeCursor(w.id), after !== null);
    },
  }),
  workRequest: t.field({
    type: WorkRequestRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
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
  fields: (t) => ({
    workspace: t.string({ required: true, description: 'scope/name' }),
    taskType: t.string({ required: true, description: 'worker, server, signing, internal or workflow' }),
    taskName: t.string({ required: true }),
    taskData: t.field({ type: 'JSON', required: true }),
    providedTags: t.stringList({ description: 'Only under prefixes the workspace grants to its members' }),
    requiredTags: t.stringList(),
    priorityBase: t.int(),
    priorityAdjustment: t.int({ description: 'A positive adjustment needs admin' }),
    dependsOn: t.idList({ description: 'BLOCKED until all of these are COMPLETED' }),
  }),
});

builder.mutationFields((t) => ({
  createWorkRequest: t.field({
    type: WorkRequestRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: CreateWorkRequestInput, required: true }) },
    resolve: (_r, { input }, ctx) => createWorkRequest(ctx, { ...input, dependsOn: input.dependsOn?.map(String) }),
  }),
  abortWorkRequest: t.field({
    type: WorkRequestRef,
    errors: { types: COMMON_ERRORS },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, { id }, ctx) => abortWorkRequest(ctx, String(id)),
  }),
  addWorkRequestDependencies: t.field({
    type: WorkRequestRef,
    description: 'Adds dependencies to a BLOCKED request; cycles are refused',
    errors: { types: COMMON_ERRORS },
    args: { id: t.arg.id({ required: true }), dependsOn: t.arg.idList({ required: true }) },
    resolve: (_r, { id, dependsOn }, ctx) => addWorkRequestDependencies(ctx, String(id), dependsOn.map(String)),
  }),
}));
