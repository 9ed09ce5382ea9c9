import { GraphQLError } from 'graphql';
import { builder } from '../builder.js';
import { costOf } from '../limits/cost.js';
import { MAX_INSTANCE_LOG_READ_BYTES, type InstanceLogTail } from '../../providers/instance-logs.js';
import { describedValues } from './enum-values.js';
import {
  AlreadyExistsError,
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import { INSTANCE_STATES } from '../../core/instance-state.js';
import { InstanceSchema, type Instance } from '../../storage/entities/instance.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { instanceCost, instancePrice, workRequestCost } from '../../scheduler/rules/pool-cost.js';
import { WorkRequestRef } from './work-request.js';
import { isOutdated } from '../../scheduler/rules/instance-retirement.js';
import {
  createInstance,
  instanceLogFor,
  recordInstanceLaunched,
  recordInstanceStopped,
  type LaunchRecord,
} from '../../services/pools/instances.js';
import { decodeCursor, encodeCursor, pageSize, toConnection } from './pagination.js';
import { PAGE } from '../limits/page.js';
import { WorkerPoolRef } from './worker-pool.js';
import { WorkerRef } from './worker.js';

const InstanceStateEnum = builder.enumType('InstanceState', {
  description:
    'LAUNCHING (recorded, its provider asked) → RUNNING (its worker connected) → STOPPING → TERMINATED; FAILED with the provider\u2019s error',
  values: describedValues<(typeof INSTANCE_STATES)[number]>({
    LAUNCHING: 'Recorded and asked of its provider; its worker has not connected yet',
    RUNNING: 'Its worker connected',
    STOPPING: 'Being stopped (idle past the pool’s timeout, or terminated by an admin)',
    TERMINATED: 'Stopped; it counts no more against the pool’s limits',
    FAILED: 'Its launch or its machine failed: `error` says why',
  }),
});

/** One machine (or process) a pool started. */
export const InstanceRef = builder.objectRef<Instance>('Instance').implement({
  description: 'One machine (or local process) a pool started, and the worker it became',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Also its worker\u2019s name, and the name its provider knows it by' }),
    pool: t.field({ type: WorkerPoolRef, description: 'The pool that started it', resolve: (i) => i.pool.id }),
    providerId: t.exposeString('providerId', {
      nullable: true,
      description: 'The provider\u2019s own id; null until its launch answered',
    }),
    worker: t.field({
      type: WorkerRef,
      nullable: true,
      description: 'The worker it runs (registered when the launch was recorded); null once that worker is deleted',
      resolve: (i) => i.worker?.id ?? null,
    }),
    state: t.field({ type: InstanceStateEnum, description: 'Where it is in its life', resolve: (i) => i.state }),
    error: t.exposeString('error', { nullable: true, description: 'Why it FAILED, or what ended it unexpectedly' }),
    requestedAt: t.expose('requestedAt', {
      type: 'DateTime',
      description: 'When its launch was recorded, before the provider was asked',
    }),
    startedAt: t.expose('startedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When its worker first connected',
    }),
    stoppingAt: t.expose('stoppingAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it was asked to stop; null while it runs',
    }),
    terminatedAt: t.expose('terminatedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When it ended (TERMINATED or FAILED); null while it lives',
    }),
    outdated: t.boolean({
      nullable: true,
      description:
        'Whether it was launched from other specifications (image, size, handlers) than its pool has now: a rollout replaces it once idle (docs/operating/pools.md, "Rollouts"); null when its launch was recorded before this was kept',
      resolve: async (i, _a, ctx) => {
        if (!i.templateFingerprint) return null;
        const pool = await ctx.em.findOne(WorkerPoolSchema, { id: i.pool.id });
        return pool ? isOutdated(i.templateFingerprint, pool) : null;
      },
    }),
    runtimeSeconds: t.float({
      description: 'From its launch to its end (or now): what counts against the pool\u2019s monthly budget',
      resolve: (i) => Math.max(0, ((i.terminatedAt ?? new Date()).getTime() - i.requestedAt.getTime()) / 1000),
    }),
    pricePerHour: t.float({
      nullable: true,
      description:
        'The price of one hour of it, recorded at its launch: its offering\u2019s pricePerHour, else its provider\u2019s price (Hetzner), else a spot offering\u2019s maxPricePerHour (an upper bound), else its pool\u2019s (its pool\u2019s now when none was recorded); null when none is known',
      resolve: async (i, _a, ctx) =>
        instancePrice(
          i.pricePerHour ?? null,
          (await ctx.loaders.byId<WorkerPool>(WorkerPoolSchema).load(i.pool.id))?.pricePerHour ?? null,
        ),
    }),
    cost: t.float({
      nullable: true,
      description:
        'What it cost from its launch to its end (or now): pricePerHour \u00d7 runtime hours, every started period in full when its pool has a billingPeriodSeconds; null without a price',
      resolve: async (i, _a, ctx) => {
        const pool = await ctx.loaders.byId<WorkerPool>(WorkerPoolSchema).load(i.pool.id);
        return instanceCost(
          instancePrice(i.pricePerHour ?? null, pool?.pricePerHour ?? null),
          i.requestedAt,
          i.terminatedAt ?? new Date(),
          pool?.billingPeriodSeconds,
        );
      },
    }),
  }),
});

/** The default of `Instance.log(tailBytes:)`. */
const DEFAULT_LOG_TAIL_BYTES = 64 * 1024;

const InstanceLogRef = builder.objectRef<InstanceLogTail>('InstanceLog').implement({
  description:
    'The end of what an instance printed (a local agent\u2019s output, a virtual machine\u2019s serial console), kept after it is gone',
  fields: (t) => ({
    text: t.exposeString('text', { description: 'The last bytes asked for, as UTF-8' }),
    bytes: t.exposeFloat('bytes', { description: 'The whole log\u2019s size in bytes' }),
    truncated: t.exposeBoolean('truncated', { description: 'Whether text is only the end of the log' }),
    modifiedAt: t.expose('modifiedAt', { type: 'DateTime', description: 'When the log was last written' }),
  }),
});

builder.objectFields(InstanceRef, (t) => ({
  log: t.field({
    type: InstanceLogRef,
    nullable: true,
    description: `Admins only (null for others): the end of its log, kept TAGSCHED_INSTANCE_LOG_RETENTION_DAYS after it was last written; null when there is none`,
    // One unit per KiB it may carry, as a work request's log page.
    extensions: costOf(
      ({ args, childComplexity }) =>
        1 + childComplexity + Math.ceil(Math.max(0, Number(args.tailBytes ?? DEFAULT_LOG_TAIL_BYTES) || 0) / 1024),
    ),
    args: {
      tailBytes: t.arg.int({
        defaultValue: DEFAULT_LOG_TAIL_BYTES,
        description: `Bytes at most, from its end (1 to ${MAX_INSTANCE_LOG_READ_BYTES})`,
      }),
    },
    resolve: (i, args, ctx) => {
      const n = args.tailBytes ?? DEFAULT_LOG_TAIL_BYTES;
      if (!Number.isSafeInteger(n) || n < 1 || n > MAX_INSTANCE_LOG_READ_BYTES) {
        throw new GraphQLError(`tailBytes must be between 1 and ${MAX_INSTANCE_LOG_READ_BYTES} bytes`, {
          extensions: { code: 'INVALID_INPUT' },
        });
      }
      return instanceLogFor(ctx.viewer, ctx.config.providers, i.name, n);
    },
  }),
}));

builder.queryFields((t) => ({
  instance: t.field({
    type: InstanceRef,
    nullable: true,
    description: 'An instance by name (its worker\u2019s name); null when there is none',
    args: { name: t.arg.string({ required: true, description: 'The instance\u2019s name' }) },
    resolve: (_root, { name }, ctx) => (name.length > 150 ? null : ctx.em.findOne(InstanceSchema, { name })),
  }),
}));

const InstanceConnection = builder.connectionObject(
  { type: InstanceRef, name: 'InstanceConnection', description: "A page of a pool's instances, newest first" },
  { description: 'An instance of the page' },
);

builder.objectFields(WorkerPoolRef, (t) => ({
  instances: t.field({
    type: InstanceConnection,
    description: 'Its instances, newest first',
    args: {
      states: t.arg({ type: [InstanceStateEnum], description: 'Only instances in these states' }),
      first: t.arg.int({ description: `How many, at most (default ${PAGE.default}, at most ${PAGE.max})` }),
      after: t.arg.string({ description: "The previous page's pageInfo.endCursor" }),
    },
    resolve: async (pool, args, ctx) => {
      const size = pageSize(args);
      const after = decodeCursor(args.after, (v): v is number => Number.isSafeInteger(v));
      // One statement for the instances of every pool of a list (loaders.ts).
      const rows = await ctx.loaders
        .instancePage({ states: args.states?.length ? args.states : null, size: size + 1, olderThan: after })
        .load(pool.id);
      return toConnection(rows, size, (i) => encodeCursor(i.id), after !== null);
    },
  }),
}));

const InstanceLaunchPayload = builder.objectRef<LaunchRecord>('InstanceLaunchPayload').implement({
  description: 'A recorded instance and the activation token for its machine',
  fields: (t) => ({
    instance: t.field({ type: InstanceRef, description: 'The instance, LAUNCHING', resolve: (r) => r.instance }),
    activationToken: t.exposeString('activationToken', {
      description: 'Shown once: the new machine\u2019s agent trades it for its worker token',
    }),
  }),
});

builder.mutationFields((t) => ({
  createInstance: t.field({
    type: InstanceLaunchPayload,
    description:
      'Admin, TAGSCHED_PROVISIONER=off: records an instance the site\u2019s script is about to start (its worker, LAUNCHING) and returns its activation token',
    errors: {
      types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, AlreadyExistsError, InvalidStateError],
    },
    args: {
      input: t.arg({
        type: builder.inputType('CreateInstanceInput', {
          description: 'The pool of the instance, and its name',
          fields: (f) => ({
            pool: f.string({ required: true, description: 'The pool' }),
            name: f.string({ description: 'Default: the pool\u2019s name and random hex' }),
          }),
        }),
        required: true,
        description: 'The pool and, optionally, the instance name',
      }),
    },
    resolve: (_r, { input }, ctx) => createInstance(ctx.em, ctx.viewer, ctx.config, input),
  }),
  recordInstanceLaunched: t.field({
    type: InstanceRef,
    description:
      'Admin, TAGSCHED_PROVISIONER=off: records the provider\u2019s id of an instance the site\u2019s script started',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('RecordInstanceLaunchedInput', {
          description: "An instance and its provider's id",
          fields: (f) => ({
            name: f.string({ required: true, description: 'The instance' }),
            providerId: f.string({ required: true, description: "The provider's id of the machine" }),
          }),
        }),
        required: true,
        description: "The instance and its provider's id",
      }),
    },
    resolve: (_r, { input }, ctx) => recordInstanceLaunched(ctx.em, ctx.viewer, ctx.config.provisioner, input),
  }),
  recordInstanceStopped: t.field({
    type: InstanceRef,
    description:
      'Admin, TAGSCHED_PROVISIONER=off: records that an instance is gone (FAILED with an error); its worker is terminated and its work re-queued',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('RecordInstanceStoppedInput', {
          description: 'An instance that is gone, and why',
          fields: (f) => ({
            name: f.string({ required: true, description: 'The instance' }),
            error: f.string({ description: 'Why it failed (FAILED); omitted: it stopped normally (TERMINATED)' }),
          }),
        }),
        required: true,
        description: 'The instance that is gone, and why',
      }),
    },
    resolve: (_r, { input }, ctx) => recordInstanceStopped(ctx.em, ctx.viewer, ctx.config, ctx.events, input),
  }),
}));

builder.objectFields(WorkRequestRef, (t) => ({
  cost: t.float({
    nullable: true,
    description:
      'Its share of its instance\u2019s cost: the instance\u2019s pricePerHour \u00d7 its run time on it in hours (startedAt to completedAt, or now) \u00f7 the worker\u2019s concurrency; null before it started, or when its worker has no instance or no price',
    resolve: async (wr, _a, ctx) => {
      if (!wr.worker || !wr.startedAt) return null;
      const price = await ctx.loaders.workerPrices.load(wr.worker.id);
      return price
        ? workRequestCost(price.pricePerHour, wr.startedAt, wr.completedAt ?? new Date(), price.concurrency)
        : null;
    },
  }),
}));
