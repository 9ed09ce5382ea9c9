import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { WorkRequestSchema } from './work-request.js';

/**
 * What a work request's run used, as its agent measured and reported it with the result
 * (shared/run-statistics.ts): one row per request, typed columns so that later reports can sum and
 * compare them per task, package or architecture. A re-run keeps the first report.
 */
export const WorkRequestStatisticsSchema = defineEntity({
  name: 'WorkRequestStatistics',
  tableName: 'work_request_statistics',
  properties: {
    workRequest: () => p.oneToOne(WorkRequestSchema).primary().owner().deleteRule('cascade'),
    setupSeconds: p.double(),
    runSeconds: p.double(),
    teardownSeconds: p.double(),
    cpuSeconds: p.double().nullable(),
    peakMemoryBytes: p.bigint('number').nullable(),
    peakDiskBytes: p.bigint('number').nullable(),
    cpuCount: p.integer(),
    memoryMethod: p.text(),
    /** The handler was killed by the out-of-memory killer; null when the agent did not say. */
    outOfMemory: p.boolean().nullable(),
    /** The run hit a full disk; null when the agent did not say. */
    diskFull: p.boolean().nullable(),
    /** The memory limit the agent applied to the run's cgroup; null: none. */
    memoryLimitBytes: p.bigint('number').nullable(),
    recordedAt: p.datetime().defaultRaw('now()'),
  },
});
export type WorkRequestStatistics = InferEntity<typeof WorkRequestStatisticsSchema>;
