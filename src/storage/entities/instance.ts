import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { WorkerPoolSchema } from './worker-pool.js';
import { WorkerSchema } from './worker.js';
import { INSTANCE_STATES } from '../../core/instance-state.js';

/**
 * One machine (or process) a pool started, and the worker it becomes. Its name is the worker's
 * name, given to the provider at launch, so that an instance the provider has can be found again
 * even when the server stopped before it recorded the provider's id.
 */
export const InstanceSchema = defineEntity({
  name: 'Instance',
  tableName: 'instance',
  properties: {
    id: p.integer().primary().autoincrement(),
    name: p.string().length(150).unique(),
    pool: () => p.manyToOne(WorkerPoolSchema),
    /** The provider's own id, once its launch answered (or reconciliation found it). */
    providerId: p.string().length(300).nullable(),
    worker: () => p.manyToOne(WorkerSchema).nullable(),
    state: p.enum([...INSTANCE_STATES]).default('LAUNCHING'),
    /** Why it FAILED, or what the provider last said about it (never a secret). */
    error: p.text().nullable(),
    requestedAt: p.datetime(),
    /** When its worker first connected. */
    startedAt: p.datetime().nullable(),
    /** When it was decided to stop it. */
    stoppingAt: p.datetime().nullable(),
    /** When its provider last accepted a request to stop it; null while none was accepted. */
    terminateRequestedAt: p.datetime().nullable(),
    terminatedAt: p.datetime().nullable(),
    /** What it was launched from (src/scheduler/rules/instance-retirement.ts: templateFingerprint); null for instances recorded before it was kept. */
    /** The price of one hour of it when it was launched (its offering's, else its pool's; src/scheduler/rules/pool-cost.ts); null when none was known. */
    pricePerHour: p.double().$type<number>().nullable(),
    templateFingerprint: p.string().length(64).nullable(),
  },
  indexes: [{ properties: 'pool' }, { properties: 'worker' }],
});
export type Instance = InferEntity<typeof InstanceSchema>;
