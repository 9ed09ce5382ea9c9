import { WorkerPoolSchema, type WorkerPool } from '../entities/worker-pool.js';
import { builder } from '../builder.js';
import { createActivationToken, createWorkerPool, updateWorkerPool } from '../services/pools.js';
import type { SizeThresholds } from '../tags/size-class.js';
import { computePoolTemplateTags } from '../tags/worker-tags.js';
import { COMMON_ERRORS } from './errors.js';
import { TagEntryRef } from './tag-entry.js';

/** A worker pool as clients see it: everything but the provider account, which is write-only. */
export const WorkerPoolRef = builder.loadableObjectRef<WorkerPool, number>('WorkerPool', {
  load: async (ids, ctx) => {
    const pools = await ctx.em.find(WorkerPoolSchema, { id: { $in: [...ids] } });
    return ids.map((id) => pools.find((p) => p.id === id) ?? new Error(`no pool ${id}`));
  },
});

// The configured size thresholds, as for the pool's workers: a template must classify its size like they do.
const template = (pool: WorkerPool, sizeThresholds: SizeThresholds) =>
  computePoolTemplateTags(
    { name: pool.name, providedTags: pool.providedTags, requiredTags: pool.requiredTags, specifications: pool.specifications },
    sizeThresholds,
  );

WorkerPoolRef.implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    providerType: t.exposeString('providerType'),
    hasProviderAccount: t.boolean({
      description: 'Whether provider credentials are set; they are never returned',
      resolve: (pool) => pool.providerAccountEncrypted != null,
    }),
    specifications: t.field({ type: 'JSON', resolve: (pool) => pool.specifications }),
    providedTags: t.exposeStringList('providedTags', { description: 'The tags the admin gave the pool (provided side)' }),
    requiredTags: t.exposeStringList('requiredTags'),
    templateProvidedTags: t.field({
      type: [TagEntryRef],
      description: 'What any worker this pool starts will provide: pool tags, specification values, worker:type:worker',
      resolve: (pool, _args, ctx) => template(pool, ctx.config.sizeThresholds).provided,
    }),
    templateRequiredTags: t.field({ type: [TagEntryRef], resolve: (pool, _args, ctx) => template(pool, ctx.config.sizeThresholds).required }),
    maxActiveInstances: t.exposeInt('maxActiveInstances'),
    minIdleInstances: t.exposeInt('minIdleInstances'),
    idleTimeoutSeconds: t.exposeInt('idleTimeoutSeconds'),
    targetLatencySeconds: t.exposeInt('targetLatencySeconds'),
    monthlyRuntimeBudgetSeconds: t.exposeInt('monthlyRuntimeBudgetSeconds', { nullable: true }),
    enabled: t.exposeBoolean('enabled'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const WorkerPoolInput = builder.inputType('WorkerPoolInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    providerType: t.string({ description: 'local or exec' }),
    providerAccount: t.field({ type: 'JSON', description: 'Provider credentials (a JSON object); write-only, encrypted at rest' }),
    specifications: t.field({ type: 'JSON', description: 'Instance size: cpuCount, memoryGib, diskGib, image, instanceType, …' }),
    providedTags: t.stringList(),
    requiredTags: t.stringList(),
    maxActiveInstances: t.int(),
    minIdleInstances: t.int(),
    idleTimeoutSeconds: t.int(),
    targetLatencySeconds: t.int(),
    monthlyRuntimeBudgetSeconds: t.int(),
    enabled: t.boolean(),
  }),
});

const ActivationTokenPayload = builder.objectRef<{ token: string }>('ActivationTokenPayload').implement({
  fields: (t) => ({ token: t.exposeString('token', { description: 'Shown once: give it to one new instance of the pool' }) }),
});

builder.queryFields((t) => ({
  workerPools: t.field({
    type: [WorkerPoolRef],
    resolve: (_root, _args, ctx) => ctx.em.find(WorkerPoolSchema, {}, { orderBy: { name: 'asc' } }),
  }),
  workerPool: t.field({
    type: WorkerPoolRef,
    nullable: true,
    args: { name: t.arg.string({ required: true }) },
    resolve: (_root, { name }, ctx) => ctx.em.findOne(WorkerPoolSchema, { name }),
  }),
}));

builder.mutationFields((t) => ({
  createWorkerPool: t.field({
    type: WorkerPoolRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: WorkerPoolInput, required: true }) },
    resolve: (_root, { input }, ctx) => createWorkerPool(ctx.em, ctx.viewer, ctx.config, ctx.secrets, input),
  }),
  updateWorkerPool: t.field({
    type: WorkerPoolRef,
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: WorkerPoolInput, required: true }) },
    resolve: (_root, { input }, ctx) => updateWorkerPool(ctx.em, ctx.viewer, ctx.config, ctx.secrets, ctx.events, input),
  }),
  createActivationToken: t.field({
    type: ActivationTokenPayload,
    errors: { types: COMMON_ERRORS },
    args: { pool: t.arg.string({ required: true }) },
    resolve: async (_root, { pool }, ctx) => ({ token: await createActivationToken(ctx.em, ctx.viewer, pool) }),
  }),
}));
