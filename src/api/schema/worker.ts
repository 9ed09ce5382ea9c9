import { builder } from '../builder.js';
import { describedValues, upperSnake } from './enum-values.js';
import {
  AlreadyExistsError,
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import type { Context } from '../context.js';
import { canSeeWorkerDetails, principalOf } from '../../services/identity/visibility.js';
import { WORKER_TYPES, WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import {
  activateWorker,
  registerWorker,
  reportWorkerMetadata,
  setWorkerStaticMetadata,
  switchWorker,
  type WORKER_SWITCHES,
} from '../../services/workers/workers.js';
import { terminateWorker } from '../../services/workers/terminate.js';
import { listWorkers } from '../../services/workers/worker-lists.js';
import { adminsOnly } from '../../services/work/idempotency.js';
import { createOnce, IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';
import { decodeCursor, encodeCursor, pageSize, toConnection } from './pagination.js';
import { PAGE } from '../limits/page.js';
import { ResourcesRef } from './resources.js';
import type { HeldFor } from '../../scheduler/storage/worker-resources.js';
import { TagEntryRef, TagRefusalRef } from './tag-entry.js';
import { WorkerPoolRef } from './worker-pool.js';
import { factsOfWorker, workerStatus, type WorkerStatus } from '../../scheduler/rules/availability.js';
import type { RetiringReason } from '../../scheduler/rules/instance-retirement.js';

const WorkerStatusEnum = builder.enumType('WorkerStatus', {
  description:
    'What a worker is doing, as the status pages show it (the first that applies, in this order: INACTIVE, DISABLED, QUARANTINED, DISCONNECTED, STALE, DRAINING, BUSY, IDLE)',
  values: describedValues<WorkerStatus>({
    INACTIVE: 'Terminated (a pool worker whose instance is gone): its tokens are refused',
    DISABLED: 'An admin disabled it: it receives nothing',
    QUARANTINED:
      'Its recent results are errors while the same tasks succeed elsewhere (see quarantineReason): it receives nothing but quarantine probes (lastQuarantineProbe)',
    DISCONNECTED: 'Its agent is not connected: it receives nothing',
    STALE: 'Connected, but its metadata is missing or older than TAGSCHED_METADATA_FRESH_SECONDS: it receives nothing',
    DRAINING: 'It finishes what it runs and takes nothing new (an admin drained it, or its agent is shutting down)',
    BUSY: 'It runs work (it may still take more, up to its concurrency)',
    IDLE: 'Available and running nothing: ready for work',
  }),
});
const RetiringReasonEnum = builder.enumType('RetiringReason', {
  description:
    'Why a pool worker retires: it takes nothing new and is stopped as soon as it is idle (docs/operating/pools.md, "Instance lifetimes")',
  values: describedValues<RetiringReason>({
    WORK_REQUESTS: "It ran the most work requests its pool gives an instance (the pool's maxWorkRequestsPerInstance)",
    LIFETIME: "Its instance is older than its pool's maxInstanceLifetimeSeconds",
    OUTDATED:
      'Its instance was launched from older specifications (image, size, handlers) than its pool has now: it is replaced once idle, at most maxReplacingInstances of the pool at a time',
  }),
});
const WorkerTypeEnum = builder.enumType('WorkerType', {
  description: 'What kind of work a worker takes',
  values: describedValues<(typeof WORKER_TYPES)[number]>(
    {
      worker: 'An external worker running build and test tasks',
      server: 'A worker inside the server, running server-side tasks',
      signing: 'A signing worker: runs signing tasks only',
      'not-assignable': 'Never receives work (kept for its record and tags)',
    },
    upperSnake,
  ),
});

const DETAILS = 'Null for viewers who may not see worker details (anonymous callers, activation tokens, other workers)';

/** A worker's detail, or null when the viewer may not see it (services/identity/visibility.ts). */
const details = <T>(ctx: Context, worker: Worker, value: T): T | null =>
  canSeeWorkerDetails(principalOf(ctx.viewer), worker) ? value : null;

const WorkerReservationRef = builder.objectRef<HeldFor>('WorkerReservation').implement({
  description:
    'A worker that shares its resources held for a large pending request (docs/reference/resources.md): until it starts, the worker takes only work that leaves it room or ends before',
  fields: (t) => ({
    workRequestId: t.id({ description: 'The request it is held for', resolve: (h) => h.workRequestId }),
    reservedAt: t.expose('reservedAt', { type: 'DateTime', description: 'Since when' }),
    startsAt: t.expose('startsAt', {
      type: 'DateTime',
      description: 'When that request is expected to fit, from the expected runs of the work it holds',
    }),
  }),
});

/** A worker. */
export const WorkerRef = builder.loadableObjectRef<Worker, number>('Worker', {
  load: async (ids, ctx) =>
    (await ctx.loaders.byId<Worker>(WorkerSchema).loadMany(ids)).map((w, i) => w ?? new Error(`no worker ${ids[i]}`)),
});

WorkerRef.implement({
  description:
    'A machine (or process) that runs work: its state, its tags and what it runs. Tags and metadata are shown to admins, signed-in users and the worker itself',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Its unique name' }),
    type: t.field({ type: WorkerTypeEnum, description: 'What kind of work it takes', resolve: (w) => w.type }),
    pool: t.field({
      type: WorkerPoolRef,
      nullable: true,
      description: 'The pool that started it; null for a static worker',
      resolve: (w) => w.pool?.id ?? null,
    }),
    status: t.field({
      type: WorkerStatusEnum,
      description: 'What it is doing now',
      resolve: async (w, _args, ctx) =>
        workerStatus(
          factsOfWorker(w),
          await ctx.loaders.activeWorkCount.load(w.id),
          new Date(),
          ctx.config.workers.metadataFreshMs,
        ),
    }),
    activeWorkCount: t.int({
      description: 'Work requests assigned to or running on this worker',
      resolve: (w, _args, ctx) => ctx.loaders.activeWorkCount.load(w.id),
    }),
    concurrency: t.exposeInt('concurrency', { description: 'How many work requests it runs at once, at most' }),
    offersResources: t.exposeBoolean('offersResources', {
      description:
        'True when it shares its CPUs, memory and disk among the requests it runs (each reserves what it needs); false: fixed slots (concurrency)',
    }),
    offeredResources: t.field({
      type: ResourcesRef,
      nullable: true,
      description:
        'What it offers while it shares its resources (from its metadata or its pool); null with fixed slots',
      resolve: (w) =>
        w.offersResources ? { cpus: w.offeredCpus, memoryMib: w.offeredMemoryMib, diskMib: w.offeredDiskMib } : null,
    }),
    freeResources: t.field({
      type: ResourcesRef,
      nullable: true,
      description: 'What it offers less what its assigned and running requests reserve; null with fixed slots',
      resolve: async (w, _a, ctx) => (await ctx.loaders.workerResources.load(w.id))?.free ?? null,
    }),
    reservation: t.field({
      type: WorkerReservationRef,
      nullable: true,
      description:
        'The pending request it is held for while that request does not fit yet: it takes only work that would not delay it. Null when it is held for none',
      resolve: async (w, _a, ctx) => details(ctx, w, (await ctx.loaders.workerResources.load(w.id))?.heldFor ?? null),
    }),
    enabled: t.exposeBoolean('enabled', { description: 'False when an admin disabled it (disableWorker)' }),
    draining: t.exposeBoolean('draining', {
      description: 'True when an admin drained it (drainWorker), or it retires (retiringReason): it takes nothing new',
    }),
    retiringReason: t.field({
      type: RetiringReasonEnum,
      nullable: true,
      description: 'Why this pool worker retires: it is drained and stopped once idle; null while it does not',
      resolve: (w) => (w.retiringReason as RetiringReason | null) ?? null,
    }),
    quarantinedAt: t.expose('quarantinedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'Set while it is quarantined (status QUARANTINED)',
    }),
    quarantineReason: t.exposeString('quarantineReason', {
      nullable: true,
      description: 'Why it is quarantined: its recent ERROR results and where the same tasks succeeded',
    }),
    shuttingDown: t.exposeBoolean('shuttingDown', {
      description: 'Its agent is shutting down: it finishes its work and takes nothing new',
    }),
    providedTags: t.field({
      type: [TagEntryRef],
      nullable: true,
      description: DETAILS,
      resolve: (w, _a, ctx) => details(ctx, w, w.providedEntries),
    }),
    requiredTags: t.field({
      type: [TagEntryRef],
      nullable: true,
      description: DETAILS,
      resolve: (w, _a, ctx) => details(ctx, w, w.requiredEntries),
    }),
    rejectedTags: t.field({
      type: [TagRefusalRef],
      nullable: true,
      description: `Tags the worker or its admin tried to add and may not. ${DETAILS}`,
      resolve: (w, _a, ctx) => details(ctx, w, w.rejectedTags),
    }),
    staticMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: DETAILS,
      resolve: (w, _a, ctx) => details(ctx, w, w.staticMetadata),
    }),
    dynamicMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: DETAILS,
      resolve: (w, _a, ctx) => details(ctx, w, w.dynamicMetadata),
    }),
    connectedAt: t.expose('connectedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When its agent connected; null while it is not connected',
    }),
    lastSeenAt: t.expose('lastSeenAt', {
      type: 'DateTime',
      nullable: true,
      description: 'Its last report or heartbeat; null: never seen',
    }),
    registeredAt: t.expose('registeredAt', { type: 'DateTime', description: 'When it was registered' }),
    instanceCreatedAt: t.expose('instanceCreatedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'For a pool worker, when its instance was created; null for a static worker',
    }),
    terminatedAt: t.expose('terminatedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it was terminated (INACTIVE); null while it may work',
    }),
  }),
});

const WorkerFilter = builder.inputType('WorkerFilter', {
  description: 'Which workers to list; every field given must hold',
  fields: (t) => ({
    pool: t.string({ description: 'Only the workers of this pool' }),
    type: t.field({ type: WorkerTypeEnum, description: 'Only workers of this type' }),
    providesTag: t.string({ description: 'Only workers providing this exact tag' }),
    requiresTag: t.string({ description: 'Only workers requiring this exact tag' }),
    includeInactive: t.boolean({
      description: 'Also list terminated dynamic workers (hidden by default)',
      defaultValue: false,
    }),
  }),
});

const TaskVersionInput = builder.inputType('TaskVersionInput', {
  description: 'A task a worker can run, and the version of its handler',
  fields: (t) => ({
    type: t.string({ required: true, description: 'The task type, e.g. worker' }),
    name: t.string({ required: true, description: 'The task name, e.g. sbuild' }),
    version: t.int({ required: true, description: 'The version of the handler' }),
  }),
});

const WorkerMetadataInput = builder.inputType('WorkerMetadataInput', {
  description: 'System facts and tags; the server derives tags from the facts (docs/design.md: workers)',
  fields: (t) => ({
    architectures: t.stringList({
      description: 'Debian architectures the machine runs natively (dpkg --print-architecture, arch-test)',
    }),
    cpuCount: t.int({ description: 'Processors the machine has' }),
    cpuSpeed: t.int({
      description:
        "The host's single-core speed score (the agent's benchmark at start; it ranks hosts): worker:cpu-speed=N",
    }),
    cpuSpeedAll: t.int({
      description: "The host's all-core speed score, every core at once: worker:cpu-speed-all=N",
    }),
    totalPhysicalMemory: t.float({ description: 'Bytes' }),
    diskFree: t.float({ description: 'Bytes free in the work directory' }),
    executors: t.stringList({ description: 'unshare, incus-lxc, incus-vm, qemu' }),
    tools: t.stringList({ description: 'sbuild, autopkgtest, mmdebstrap, debsign, sbsign, …' }),
    tasks: t.field({ type: [TaskVersionInput], description: 'Tasks and versions the worker can run' }),
    providedTags: t.stringList({
      description: 'Tags to provide, beyond those derived from the facts (refused ones are recorded in rejectedTags)',
    }),
    requiredTags: t.stringList({ description: 'Honoured in static (admin) metadata only' }),
  }),
});

const WorkerTokenPayload = builder.objectRef<{ worker: Worker; token: string }>('WorkerTokenPayload').implement({
  description: 'A worker and its token',
  fields: (t) => ({
    worker: t.field({ type: WorkerRef, description: 'The worker', resolve: (p) => p.worker }),
    token: t.exposeString('token', { description: 'The worker token, shown once' }),
  }),
});

const WorkerConnection = builder.connectionObject(
  { type: WorkerRef, name: 'WorkerConnection', description: 'A page of workers, by name' },
  { description: 'A worker of the page' },
);

builder.queryFields((t) => ({
  workers: t.field({
    type: WorkerConnection,
    args: {
      filter: t.arg({ type: WorkerFilter, description: 'Which workers; omitted: every active one' }),
      first: t.arg.int({ description: `How many, at most (default ${PAGE.default}, at most ${PAGE.max})` }),
      after: t.arg.string({ description: "The previous page's pageInfo.endCursor" }),
    },
    description: 'Workers by name; terminated dynamic workers are hidden unless filter.includeInactive',
    resolve: async (_root, args, ctx) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is string => typeof v === 'string');
      // A tag filter reads worker details: it keeps only the workers whose details the viewer may see.
      const rows = await listWorkers(ctx.em, ctx.viewer, args.filter, { after, limit: size + 1 });
      return toConnection(rows, size, (w) => encodeCursor(w.name), after !== null);
    },
  }),
  worker: t.field({
    type: WorkerRef,
    nullable: true,
    description: 'A worker by name; null when there is none',
    args: { name: t.arg.string({ required: true, description: "The worker's name" }) },
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
          description: 'The worker',
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
    description:
      'Admin: terminates a pool worker: INACTIVE at once (its tokens refused), work it had not started back to PENDING, running work re-queued as a retry; its instance STOPPING',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('TerminateWorkerInput', {
          description: 'The pool worker to terminate',
          fields: (f) => ({ name: f.string({ required: true, description: "The worker's name" }) }),
        }),
        required: true,
        description: 'The pool worker to terminate',
      }),
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
          description: 'A new worker',
          fields: (f) => ({
            name: f.string({ required: true, description: 'Its unique name' }),
            type: f.field({ type: WorkerTypeEnum, description: 'What kind of work it takes (default WORKER)' }),
            concurrency: f.int({
              description: "How many work requests it runs at once, 1 to 1024 (default: its pool's, else 1)",
            }),
            offersResources: f.boolean({
              description:
                'It shares its CPUs, memory and disk (from its metadata) among the requests it runs, concurrency capping their number (default false; a pool worker takes its pool’s setting)',
            }),
            pool: f.string({ description: 'The pool it belongs to; omitted for a static worker' }),
            staticMetadata: f.field({
              type: WorkerMetadataInput,
              description: 'Facts and tags the admin vouches for (admin provenance)',
            }),
          }),
        }),
        required: true,
        description: 'The worker to register',
      }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: (_root, { input, idempotencyKey }, ctx) =>
      createOnce<{ worker: Worker; token: string }>(
        ctx,
        'registerWorker',
        idempotencyKey,
        input,
        {
          idOf: (r) => r.worker.id,
          secretOf: (r) => r.token,
          replay: async (em, id, token) => ({
            worker: await em.findOneOrFail(WorkerSchema, { id }),
            token: token ?? '',
          }),
          mayRead: adminsOnly,
        },
        (tx) => registerWorker(tx, ctx.viewer, ctx.config, input),
      ),
  }),
  activateWorker: t.field({
    type: WorkerTokenPayload,
    description:
      'With a pool activation token: creates this instance as a worker of the pool and returns its worker token',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, AlreadyExistsError] },
    args: {
      input: t.arg({
        type: builder.inputType('ActivateWorkerInput', {
          description: 'The name of the new worker',
          fields: (f) => ({
            name: f.string({
              description:
                'Its name (default: the pool’s name and a random suffix; must match when the token was issued for a named instance)',
            }),
          }),
        }),
        required: true,
        description: 'The name of the new worker',
      }),
    },
    resolve: (_root, { input }, ctx) => activateWorker(ctx.em, ctx.viewer, ctx.config.tags, input),
  }),
  reportWorkerMetadata: t.field({
    type: WorkerRef,
    description:
      'Worker token: reports dynamic metadata; the worker tags are recomputed (refused tags are recorded, never fatal)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError] },
    args: {
      input: t.arg({
        type: builder.inputType('ReportWorkerMetadataInput', {
          description: "The calling worker's facts",
          fields: (f) => ({
            metadata: f.field({
              type: WorkerMetadataInput,
              required: true,
              description: 'Its facts now; they replace the previous report',
            }),
          }),
        }),
        required: true,
        description: "The calling worker's facts",
      }),
    },
    resolve: (_root, { input }, ctx) =>
      reportWorkerMetadata(ctx.em, ctx.viewer, ctx.config.tags, ctx.events, input, ctx.serverStopping()),
  }),
  setWorkerStaticMetadata: t.field({
    type: WorkerRef,
    description: 'Admin: replaces the static metadata of a worker (admin provenance) and recomputes its tags',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: builder.inputType('SetWorkerStaticMetadataInput', {
          description: "A worker and the admin's facts about it",
          fields: (f) => ({
            name: f.string({ required: true, description: "The worker's name" }),
            metadata: f.field({
              type: WorkerMetadataInput,
              required: true,
              description: 'The static metadata; it replaces the previous one',
            }),
            concurrency: f.int({ description: 'A new concurrency, 1 to 1024; omitted: unchanged' }),
            offersResources: f.boolean({
              description: 'Whether it shares its CPUs, memory and disk (a static worker); omitted: unchanged',
            }),
          }),
        }),
        required: true,
        description: 'The worker and its static metadata',
      }),
    },
    resolve: (_root, { input }, ctx) => setWorkerStaticMetadata(ctx.em, ctx.viewer, ctx.config, ctx.events, input),
  }),
}));
