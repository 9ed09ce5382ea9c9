import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { WorkerSchema } from './worker.js';

/**
 * What changes about a worker while it runs (availability, last completion) and its shape version,
 * copied from `worker` by PostgreSQL itself (trigger `worker_state_copy`, migration worker_state):
 * a narrow row, so that the bulk questions read the state of every worker without reading the
 * wide worker rows (tags, metadata, provenance). Never written by the application.
 */
export const WorkerStateSchema = defineEntity({
  name: 'WorkerState',
  tableName: 'worker_state',
  properties: {
    worker: () => p.oneToOne(WorkerSchema).primary().deleteRule('cascade').updateRule('cascade'),
    shapeVersion: p.bigint(),
    type: p.text(),
    enabled: p.boolean(),
    draining: p.boolean(),
    shuttingDown: p.boolean(),
    connectedAt: p.datetime().nullable(),
    metadataReportedAt: p.datetime().nullable(),
    quarantinedAt: p.datetime().nullable(),
    terminatedAt: p.datetime().nullable(),
    lastCompletedAt: p.datetime().nullable(),
    /** metadataReportedAt and lastCompletedAt as epoch milliseconds (fractions kept), computed by the trigger. */
    reportedMs: p.double().nullable(),
    lastCompletedMs: p.double().nullable(),
  },
});
export type WorkerStateRow = InferEntity<typeof WorkerStateSchema>;
