import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * Which workers a task's figures came from (scheduler/storage/task-statistics.ts): per key (as the
 * histograms), metric (`memory`, `disk`), workspace, worker and day (UTC), how many runs that worker
 * reported and the highest histogram bucket of their figures. Learned minimums need two workers and
 * are capped by the second-highest worker's figure (core/tasks/learned-requirements.ts). No foreign keys: a
 * deleted worker's rows stay until the housekeeping deletes those older than the window.
 */
export const TaskStatisticsWorkerSchema = defineEntity({
  name: 'TaskStatisticsWorker',
  tableName: 'task_statistics_worker',
  properties: {
    taskType: p.text().primary(),
    taskName: p.text().primary(),
    package: p.text().primary(),
    architecture: p.text().primary(),
    metric: p.text().primary(),
    workspaceId: p.integer().primary(),
    workerId: p.integer().primary(),
    day: p.date().primary(),
    runs: p.integer(),
    maxBucket: p.integer(),
  },
  indexes: [{ name: 'task_statistics_worker_day', properties: ['day'] }],
});
export type TaskStatisticsWorker = InferEntity<typeof TaskStatisticsWorkerSchema>;
