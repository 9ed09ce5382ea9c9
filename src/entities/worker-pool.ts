import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { PoolSpecifications } from '../tags/worker-tags.js';

/** A template for dynamic workers on a provider, with tags, limits and an encrypted provider account. */
export const WorkerPoolSchema = defineEntity({
  name: 'WorkerPool',
  tableName: 'worker_pool',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(100).unique(),
    /** A key of the provider registry (src/provisioner/providers.ts). */
    providerType: p.string().length(50),
    /** AES-256-GCM ciphertext of the provider account JSON; never leaves the server. */
    providerAccountEncrypted: p.text().nullable(),
    specifications: p.json<PoolSpecifications>().default('{}'),
    /**
     * The tags of the image `specifications.image` names, copied from its manifest when the pool is
     * given it (images never change once registered); null for a pool with no image.
     */
    imageTags: p.array().columnType('text[]').nullable(),
    providedTags: p.array().columnType('text[]').default([]),
    requiredTags: p.array().columnType('text[]').default([]),
    maxActiveInstances: p.integer().default(10),
    minIdleInstances: p.integer().default(0),
    idleTimeoutSeconds: p.integer().default(600),
    targetLatencySeconds: p.integer().default(600),
    /** Monthly runtime budget in seconds of instance time; null means unlimited. */
    monthlyRuntimeBudgetSeconds: p.integer().nullable(),
    enabled: p.boolean().default(true),
    /** Launches that failed in a row since the last one that worked (src/scheduler/rules/pool-health.ts). */
    launchFailures: p.integer().default(0),
    /** No launch is tried before this, after failures (backoff); null when none failed. */
    launchRetryAt: p.datetime().nullable(),
    /** The last provider error of the pool (launch, stop or list), for admins; never a secret. */
    lastError: p.text().nullable(),
    /** The kind of that error (quota, capacity, auth, timeout, invalid, unavailable). */
    lastErrorKind: p.string().length(20).nullable(),
    lastErrorAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type WorkerPool = InferEntity<typeof WorkerPoolSchema>;
