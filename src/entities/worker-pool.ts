import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { PoolSpecifications } from '../tags/worker-tags.js';

/** Provider kinds; cloud providers join this list, each with its own provisioner module. */
export const PROVIDER_TYPES = ['local', 'exec'] as const;
export type ProviderType = (typeof PROVIDER_TYPES)[number];

/** A template for dynamic workers on a provider, with tags, limits and an encrypted provider account. */
export const WorkerPoolSchema = defineEntity({
  name: 'WorkerPool',
  tableName: 'worker_pool',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(100).unique(),
    providerType: p.string().length(50),
    /** AES-256-GCM ciphertext of the provider account JSON; never leaves the server. */
    providerAccountEncrypted: p.text().nullable(),
    specifications: p.json<PoolSpecifications>().default('{}'),
    providedTags: p.array().columnType('text[]').default([]),
    requiredTags: p.array().columnType('text[]').default([]),
    maxActiveInstances: p.integer().default(10),
    minIdleInstances: p.integer().default(0),
    idleTimeoutSeconds: p.integer().default(600),
    targetLatencySeconds: p.integer().default(600),
    /** Monthly runtime budget in seconds of instance time; null means unlimited. */
    monthlyRuntimeBudgetSeconds: p.integer().nullable(),
    enabled: p.boolean().default(true),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type WorkerPool = InferEntity<typeof WorkerPoolSchema>;
