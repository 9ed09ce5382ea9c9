import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { TagEntry, TagRefusal } from '../../core/tags/types.js';
import type { WorkerMetadata } from '../../core/tags/worker-tags.js';
import { WorkerPoolSchema } from './worker-pool.js';

/** What a worker runs: it must match the `worker:type:*` a task requires. */
export const WORKER_TYPES = ['worker', 'server', 'signing', 'not-assignable'] as const;
export type WorkerType = (typeof WORKER_TYPES)[number];

/**
 * A machine that runs work requests. The computed tag sets are stored twice on purpose: as
 * entries with provenance (for people) and as plain `text[]` (for the bulk matcher's indexes).
 */
export const WorkerSchema = defineEntity({
  name: 'Worker',
  tableName: 'worker',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(150).unique(),
    type: p.enum([...WORKER_TYPES]).default('worker'),
    pool: () => p.manyToOne(WorkerPoolSchema).nullable(),
    staticMetadata: p.json<WorkerMetadata>().default('{}'),
    dynamicMetadata: p.json<WorkerMetadata>().default('{}'),
    concurrency: p.integer().default(1),
    /**
     * Whether it shares its resources (docs/reference/resources.md): each request reserves CPUs, memory and
     * disk of what it offers (scheduler/rules/resources.ts), and concurrency caps only their number.
     */
    offersResources: p.boolean().default(false),
    /** What it offers while it shares its resources: from its metadata (services/workers/worker-tags.ts); 0 while it does not. */
    offeredCpus: p.integer().default(0),
    offeredMemoryMib: p.integer().default(0),
    offeredDiskMib: p.integer().default(0),
    enabled: p.boolean().default(true),
    draining: p.boolean().default(false),
    /** Set by the worker's own agent when it is shutting down (SIGTERM): it finishes its work and takes nothing new. */
    shuttingDown: p.boolean().default(false),
    connectedAt: p.datetime().nullable(),
    lastSeenAt: p.datetime().nullable(),
    /** When it last reported its dynamic metadata (the server workers: when they started): availability needs a fresh report (docs/design.md: workers). */
    metadataReportedAt: p.datetime().nullable(),
    /** Set when its recent results are errors while the same tasks succeed elsewhere (scheduler/storage/quarantine.ts): it gets no work until lifted. */
    quarantinedAt: p.datetime().nullable(),
    quarantineReason: p.text().nullable(),
    /** When it last completed a request (kept at completion: idle time without reading history). */
    lastCompletedAt: p.datetime().nullable(),
    registeredAt: p.datetime().onCreate(() => new Date()),
    instanceCreatedAt: p.datetime().nullable(),
    /** Requests assigned to it, counted by PostgreSQL for the workers of pools with maxWorkRequestsPerInstance (src/scheduler/rules/instance-retirement.ts); 0 for the others. */
    assignedTotal: p.integer().default(0),
    /** Why this pool worker retires (RETIRING_REASONS: it drains and is stopped once idle); null while it does not. */
    retiringReason: p.string().length(20).nullable(),
    /** Set when a dynamic worker's instance is gone: it is inactive, kept for history. */
    terminatedAt: p.datetime().nullable(),
    providedTags: p.array().columnType('text[]').default([]),
    requiredTags: p.array().columnType('text[]').default([]),
    providedEntries: p.json<TagEntry[]>().default('[]'),
    requiredEntries: p.json<TagEntry[]>().default('[]'),
    rejectedTags: p.json<TagRefusal[]>().default('[]'),
    /** Raised by PostgreSQL (a trigger) when the name, type, pool, concurrency, tags or registration change: see scheduler/storage/worker-snapshot.ts. */
    shapeVersion: p.bigint().default(0).lazy().hidden(),
  },
  indexes: [
    { properties: 'pool' },
    // Workers in the placement's first order, static before pool workers, then by id (FREE_FOR_CLASS_SQL
    // in scheduler/storage/place.ts): a new request's placement reads the first few free ones in this order
    // instead of checking every worker and sorting them.
    {
      name: 'worker_placement_order',
      expression: `create index "worker_placement_order" on "worker" (("pool_id" is not null), "id")`,
    },
    // The quarantined workers alone, for the quarantine probes (services/work/quarantine-probes.ts), which look for them every pass.
    {
      name: 'worker_quarantined',
      expression: `create index "worker_quarantined" on "worker" ("quarantined_at") where "quarantined_at" is not null`,
    },
  ],
});
export type Worker = InferEntity<typeof WorkerSchema>;
