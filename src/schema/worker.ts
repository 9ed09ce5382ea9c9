import type { FilterQuery } from '@mikro-orm/core';
import { builder } from '../builder.js';
import { AlreadyExistsError, ForbiddenError, InputError, InvalidStateError, NotFoundError, UnauthenticatedError } from '../errors.js';
import type { Context } from '../context.js';
import { asFilter } from '../db/condition.js';
import { canSeeWorkerDetails, principalOf, workerDetailsSql } from '../services/visibility.js';
import { costOf, pagedCost } from '../limits/cost.js';
import { WORKER_TYPES, WorkerSchema, type Worker } from '../entities/worker.js';
import { activateWorker, registerWorker, reportWorkerMetadata, setWorkerStaticMetadata, switchWorker, type WORKER_SWITCHES } from '../services/workers.js';
import { terminateWorker } from '../services/terminate.js';
import { createOnce, IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';
import { decodeCursor, encodeCursor, pageSize, toConnection } from './pagination.js';
import { TagEntryRef, TagRefusalRef } from './tag-entry.js';
import { WorkerPoolRef } from './worker-pool.js';
import { factsOfWorker, WORKER_STATUSES, workerStatus } from '../scheduler/availability.js';

const WorkerStatusEnum = builder.enumType('WorkerStatus', { values: WORKER_STATUSES, description: 'What a worker is doing; STALE: connected, but its metadata is missing or older than the freshness setting; QUARANTINED: its recent results are errors while the same tasks succeed elsewhere (see quarantineReason)' });
const WorkerTypeEnum = builder.enumType('WorkerType', {
  values: Object.fromEntries(WORKER_TYPES.map((v) => [v.toUpperCase().replace('-', '_'), { value: v }])) as Record<string, { value: (typeof WORKER_TYPES)[number] }>,
});

const DETAILS = 'Null for viewers who may not see worker details (anonymous callers, activation tokens, other workers)';

/** A worker's detail, or null when the viewer may not see it (services/visibility.ts). */
const details = <T>(ctx: Context, worker: Worker, value: T): T | null => (canSeeWorkerDetails(principalOf(ctx.viewer), worker) ? value : null);

/** A worker. */
export const WorkerRef = builder.loadableObjectRef<Worker, number>('Worker', {
  load: async (ids, ctx) => (await ctx.loaders.byId<Worker>(WorkerSchema).loadMany(ids)).map((w, i) => w ?? new Error(`no worker ${ids[i]}`)),
});

WorkerRef.implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    type: t.field({ type: WorkerTypeEnum, resolve: (w) => w.type }),
    pool: t.field({ type: WorkerPoolRef, nullable: true, resolve: (w) => w.pool?.id ?? null }),
    status: t.field({
      type: WorkerStatusEnum,
      resolve: async (w, _args, ctx) => workerStatus(factsOfWorker(w), await ctx.loaders.activeWorkCount.load(w.id), new Date(), ctx.config.metadataFreshMs),
    }),
    activeWorkCount: t.int({
      description: 'Work requests assigned to or running on this worker',
      resolve: (w, _args, ctx) => ctx.loaders.activeWorkCount.load(w.id),
    }),
    concurrency: t.exposeInt('concurrency'),
    enabled: t.exposeBoolean('enabled'),
    draining: t.exposeBoolean('draining'),
    quarantinedAt: t.expose('quarantinedAt', { type: 'DateTime', nullable: true, description: 'Set while it is quarantined (status QUARANTINED)' }),
    quarantineReason: t.exposeString('quarantineReason', { nullable: true, description: 'Why it is quarantined: its recent ERROR results and where the same tasks succeeded' }),
    shuttingDown: t.exposeBoolean('shuttingDown', { description: 'Its agent is shutting down: it finishes its work and takes nothing new' }),
    providedTags: t.field({ type: [TagEntryRef], nullable: true, description: DETAILS, resolve: (w, _a, ctx) => details(ctx, w, w.providedEntries) }),
    requiredTags: t.field({ type: [TagEntryRef], nullable: true, description: DETAILS, resolve: (w, _a, ctx) => details(ctx, w, w.requiredEntries) }),
    rejectedTags: t.field({
      type: [TagRefusalRef],
      nullable: true,
      description: `Tags the worker or its admin tried to add and may not. ${DETAILS}`,
      resolve: (w, _a, ctx) => details(ctx, w, w.rejectedTags),
    }),
    staticMetadata: t.field({ type: 'JSON', nullable: true, description: DETAILS, resolve: (w, _a, ctx) => details(ctx, w, w.staticMetadata) }),
    dynamicMetadata: t.field({ type: 'JSON', nullable: true, description: DETAILS, resolve: (w, _a, ctx) => details(ctx, w, w.dynamicMetadata) }),
    connectedAt: t.expose('connectedAt', { type: 'DateTime', nullable: true }),
    lastSeenAt: t.expose('lastSeenAt', { type: 'DateTime', nullable: true }),
    registeredAt: t.expose('registeredAt', { type: 'DateTime' }),
    instanceCreatedAt: t.expose('instanceCreatedAt', { type: 'DateTime', nullable: true }),
    terminatedAt: t.expose('terminatedAt', { type: 'DateTime', nullable: true }),
  }),
});

const WorkerFilter = builder.inputType('WorkerFilter', {
  fields: (t) => ({
    pool: t.string(),
    type: t.field({ type: WorkerTypeEnum }),
    providesTag: t.string({ description: 'Only workers providing this exact tag' }),
    requiresTag: t.string({ description: 'Only workers requiring this exact tag' }),
    includeInactive: t.boolean({ description: 'Also list terminated dynamic workers (hidden by default)', defaultValue: false }),
  }),
});

const TaskVersionInput = builder.inputType('TaskVersionInput', {
  fields: (t) => ({ type: t.string({ required: true }), name: t.string({ required: true }), version: t.int({ required: true }) }),
});

const WorkerMetadataInput = builder.inputType('WorkerMetadataInput', {
  description: 'System facts and tags; the server derives tags from the facts (DESIGN §3)',
  fields: (t) => ({
    architectures: t.stringList({ description: 'Debian architectures the machine runs natively (dpkg --print-architecture, arch-test)' }),
    cpuCount: t.int(),
    totalPhysicalMemory: t.float({ description: 'Bytes' }),
    diskFree: t.float({ description: 'Bytes free in the work directory' }),
    executors: t.stringList({ description: 'unshare, incus-lxc, incus-vm, qemu' }),
    tools: t.stringList({ description: 'sbuild, autopkgtest, mmdebstrap, debsign, sbsign, …' }),
    tasks: t.field({ type: [TaskVersionInput], description: 'Tasks and versions the worker can run' }),
    providedTags: t.stringList(),
    requiredTags: t.stringList({ description: 'Honoured in static (admin) metadata only' }),
  }),
});

const WorkerTokenPayload = builder.objectRef<{ worker: Worker; token: string }>('WorkerTokenPayload').implement({
  fields: (t) => ({
    worker: t.field({ type: WorkerRef, resolve: (p) => p.worker }),
    token: t.exposeString('token', { description: 'The worker token, shown once' }),
  }),
});

const WorkerConnection = builder.connectionObject({ type: WorkerRef, name: 'WorkerConnection', description: 'A page of workers, by name' }, { description: 'A worker of the page' });

builder.queryFields((t) => ({
  workers: t.field({
    type: WorkerConnection,
    extensions: costOf(pagedCost()),
    args: {
      filter: t.arg({ type: WorkerFilter }),
      first: t.arg.int(),
      after: t.arg.string(),
    },
    description: 'Workers by name; terminated dynamic workers are hidden unless filter.includeInactive',
    resolve: async (_root, args, ctx) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is string => typeof v === 'string');
      const f = args.filter;
      const where: FilterQuery<Worker> = {};
      if (!f?.includeInactive) where.terminatedAt = null;
      if (f?.pool) where.pool = { name: f.pool };
      if (f?.type) where.type = f.type;
      if (f?.providesTag) where.providedTags = { $contains: [f.providesTag] };
      if (f?.requiresTag) where.requiredTags = { $contains: [f.requiresTag] };
      if (after !== null) where.name = { $gt: after };
      // A tag filter reads worker details: it keeps only the workers whose details the viewer may see.
      const principal = principalOf(ctx.viewer);
      const and: FilterQuery<Worker>[] = [where];
      if (f?.providesTag || f?.requiresTag) and.push(asFilter((alias) => workerDetailsSql(principal, alias)));
      const rows = await ctx.em.find(WorkerSchema, { $and: and }, { orderBy: { name: 'asc' }, limit: size + 1 });
      return toConnection(rows, size, (w) => encodeCursor(w.name), after !== null);
    },
  }),
  worker: t.field({
    type: WorkerRef,
    nullable: true,
    args: { name: t.arg.string({ required: true }) },
    resolve: (_root, { name }, ctx) => ctx.em.findOne(WorkerSchema, { name }),
  }),
}));

const switchField = (change: keyof typeof WORKER_SWITCHES, description: string) =>
  builder.mutationField(`${change}Worker`, (t) =>
    t.field({
      type: WorkerRef,
      description,
      errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
      args: {
        input: t.arg({
          type: builder.inputType(`${change[0].toUpperCase()}${change.slice(1)}WorkerInput`, {
            description: `Which worker ${change}Worker changes`,
            fields: (f) => ({ name: f.string({ required: true, description: "The worker's name" }) }),
          }),
          required: true,
        }),
      },
      resolve: (_root, { input }, ctx) => switchWorker(ctx.em, ctx.viewer, ctx.events, input.name, change),
    }),
  );
switchField('drain', 'Admin: the worker finishes what it runs and receives nothing new');
switchField('undrain', 'Admin: the worker receives work again');
switchField('enable', 'Admin: the worker may receive work');
switchField('disable', 'Admin: the worker receives nothing (what it runs is not stopped)');
switchField('unquarantine', 'Admin: lifts a quarantine (status QUARANTINED): the worker receives work again');

builder.mutationFields((t) => ({
  terminateWorker: t.field({
    type: WorkerRef,
    description: 'Admin: terminates a pool worker: INACTIVE at once (its tokens refused), work it had not started back to PENDING, running work re-queued as a retry; its instance STOPPING',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({ type: builder.inputType('TerminateWorkerInput', { fields: (f) => ({ name: f.string({ required: true }) }) }), required: true }),
    },
    resolve: (_root, { input }, ctx) => terminateWorker(ctx.em, ctx.viewer, ctx.config, ctx.events, input),
  }),
  registerWorker: t.field({
    type: WorkerTokenPayload,
    description: 'Admin: registers a worker and returns its token (shown once)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, AlreadyExistsError] },
    args: {
      input: t.arg({
        type: builder.inputType('RegisterWorkerInput', {
          fields: (f) => ({
            name: f.string({ required: true }),
            type: f.field({ type: WorkerTypeEnum }),
            concurrency: f.int(),
            pool: f.string(),
            staticMetadata: f.field({ type: WorkerMetadataInput }),
          }),
        }),
        required: true,
      }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_root, { input, idempotencyKey }, ctx) =>
      createOnce<{ worker: Worker; token: string }>(
        ctx,
        'registerWorker',
        idempotencyKey,
        input,
        { idOf: (r) => r.worker.id, secretOf: (r) => r.token, replay: async (em, id, token) => ({ worker: await em.findOneOrFail(WorkerSchema, { id }), token: token ?? '' }) },
        (tx) => registerWorker(tx, ctx.viewer, ctx.config, input),
      ),
  }),
  activateWorker: t.field({
    type: WorkerTokenPayload,
    description: 'With a pool activation token: creates this instance as a worker of the pool and returns its worker token',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, AlreadyExistsError] },
    args: { input: t.arg({ type: builder.inputType('ActivateWorkerInput', { fields: (f) => ({ name: f.string() }) }), required: true }) },
    resolve: (_root, { input }, ctx) => activateWorker(ctx.em, ctx.viewer, ctx.config, input),
  }),
  reportWorkerMetadata: t.field({
    type: WorkerRef,
    description: 'Worker token: reports dynamic metadata; the worker tags are recomputed (refused tags are recorded, never fatal)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError] },
    args: {
      input: t.arg({
        type: builder.inputType('ReportWorkerMetadataInput', { fields: (f) => ({ metadata: f.field({ type: WorkerMetadataInput, required: true }) }) }),
        required: true,
      }),
    },
    resolve: (_root, { input }, ctx) => reportWorkerMetadata(ctx.em, ctx.viewer, ctx.config, ctx.events, input),
  }),
  setWorkerStaticMetadata: t.field({
    type: WorkerRef,
    description: 'Admin: replaces the static metadata of a worker (admin provenance) and recomputes its tags',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('SetWorkerStaticMetadataInput', {
          fields: (f) => ({
            name: f.string({ required: true }),
            metadata: f.field({ type: WorkerMetadataInput, required: true }),
            concurrency: f.int(),
          }),
        }),
        required: true,
      }),
    },
    resolve: (_root, { input }, ctx) => setWorkerStaticMetadata(ctx.em, ctx.viewer, ctx.config, ctx.events, input),
  }),
}));
